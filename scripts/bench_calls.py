#!/usr/bin/env python3
"""What one management call costs the source broker (issue 29): the calls a move's batch makes on east-1 — a read
of one queue attribute (the refill's `ScheduledCount`) and a counted, filtered `moveMessages` into staging (the
refill) — each made N times, its broker CPU per call (`/proc/<pid>/stat` of east-1) and wall time per call, two ways:

- through Jolokia on one kept-alive HTTP connection, with basic auth alone (the console's JAAS login on every
  request, as the product made them before session 24) and with a console session's cookie as well (one login,
  as the product makes them now: `src/broker/jolokia/session.rs`);
- as Core messages to the broker's management address over one kept session (scripts/java/CoreManagementCalls.java,
  the official client's ClientRequestor), which authenticates once, at the session.

The moves take the messages of a queue produced first (30,000 × 1 KiB unless said) into a second queue, 200 and
1,000 a call. Both queues are removed at the end. Prints a table and `jolokia_vs_core_read_cpu: x` (how many times
the broker's CPU per read through Jolokia is through Core).

Run through `scripts/bench calls [--messages 30000] [--calls 40]` (test bed up).
"""
import argparse
import base64
import http.client
import json
import os
import subprocess
import sys
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib as bl  # noqa: E402
from bench_cpu import broker_pid, cpu_seconds  # noqa: E402

MOVE = "moveMessages(int,java.lang.String,java.lang.String,boolean,int)"


class CoreCalls:
    """The Java helper, its session made: lines in, 'done <ms> <result>' out."""

    def __init__(self, env, n):
        classpath = bl.build_java(env, "CoreManagementCalls")
        self.proc = subprocess.Popen(["java", "-Xmx256m", "-cp", classpath, "CoreManagementCalls", n["core_url"],
                                      n["user"], n["password"]], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True, bufsize=1)
        assert self.proc.stdout.readline().strip() == "ready", "the Core management helper did not start"

    def calls(self, *words):
        self.proc.stdin.write("\t".join(str(w) for w in words) + "\n")
        self.proc.stdin.flush()
        answer = self.proc.stdout.readline().split()
        if not answer or answer[0] != "done":
            raise RuntimeError(f"the Core management helper failed on {words}")
        return answer

    def close(self):
        self.proc.stdin.close()
        self.proc.wait()


class KeptJolokia:
    """Jolokia requests on one kept-alive HTTP connection, with basic auth and, when `session`, the cookie of a
    console login (`…/console/auth/login`), as `src/broker/jolokia/client.rs` sends them."""

    def __init__(self, n, session):
        url = urllib.parse.urlsplit(n["jolokia_url"])
        self.path = url.path.rstrip("/") + "/"
        self.conn = http.client.HTTPConnection(url.hostname, url.port)
        auth = base64.b64encode(f"{n['user']}:{n['password']}".encode()).decode()
        self.headers = {"Authorization": "Basic " + auth, "Origin": "http://127.0.0.1",
                        "Content-Type": "application/json"}
        if session:
            login = self.path.rstrip("/").rsplit("/", 1)[0] + "/auth/login"
            answer = self._post(login, {"username": n["user"], "password": n["password"]})
            self.headers["Cookie"] = answer.getheader("Set-Cookie").split(";")[0]
            answer.read()

    def _post(self, path, body):
        self.conn.request("POST", path, json.dumps(body), self.headers)
        return self.conn.getresponse()

    def read(self, mbean, attribute):
        answer = json.load(self._post(self.path, {"type": "read", "mbean": mbean, "attribute": attribute}))
        if answer.get("status") != 200:
            raise RuntimeError(f"read {attribute}: {answer.get('error')}")
        return answer.get("value")


def measure(pid, calls, fn):
    """(broker CPU ms per call, wall ms per call) of `calls` calls of `fn`, after a second's quiet."""
    time.sleep(1.0)
    cpu, wall = cpu_seconds(pid), time.time()
    fn()
    return 1000 * (cpu_seconds(pid) - cpu) / calls, 1000 * (time.time() - wall) / calls


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--messages", type=int, default=30000)
    p.add_argument("--calls", type=int, default=40)
    a = p.parse_args()
    env = bl.testbed_env()
    east = bl.node(env, "east-1")
    pid = broker_pid("east-1")
    tag = str(int(time.time()))
    src, staging = f"calls.{tag}.src", f"calls.{tag}.staging"
    for q in (src, staging):
        bl.create_queue(east, q)
    core = None
    try:
        bl.produce(env, east, src, a.messages, 1024)
        mbean = (f'{bl.broker_mbean(east)},component=addresses,address="{src}",subcomponent=queues,'
                 f'routing-type="anycast",queue="{src}"')
        # Every message the producer sent matches: the broker's walk takes from the head, as a whole-queue refill's.
        frozen = f"AMQTimestamp <= {int(time.time() * 1000) + 1000}"
        core = CoreCalls(env, east)
        n = a.calls
        rows = []

        def jolokia_moves(per_call, calls):
            return lambda: [bl.jolokia_exec(east, mbean, MOVE, [per_call, frozen, staging, False, per_call])
                            for _ in range(calls)]

        rows.append(("read ScheduledCount", "Jolokia",
                     measure(pid, n, lambda: [bl.jolokia_read(east, mbean, "ScheduledCount") for _ in range(n)])))
        for how, session in (("Jolokia, kept connection, basic auth", False),
                             ("Jolokia, kept connection, session", True)):
            kept = KeptJolokia(east, session)
            rows.append(("read ScheduledCount", how,
                         measure(pid, n, lambda: [kept.read(mbean, "ScheduledCount") for _ in range(n)])))
        rows.append(("read ScheduledCount", "Core", measure(pid, n, lambda: core.calls("read", src, "scheduledCount", n))))
        moves = max(1, min(n, a.messages // 4 // 200))
        rows.append(("moveMessages of 200", "Jolokia", measure(pid, moves, jolokia_moves(200, moves))))
        rows.append(("moveMessages of 200", "Core",
                     measure(pid, moves, lambda: core.calls("move", src, staging, frozen, 200, moves))))
        big = max(1, min(n, a.messages // 4 // 1000))
        rows.append(("moveMessages of 1,000", "Jolokia", measure(pid, big, jolokia_moves(1000, big))))
        rows.append(("moveMessages of 1,000", "Core",
                     measure(pid, big, lambda: core.calls("move", src, staging, frozen, 1000, big))))
        print(f"{bl.header_words('calls')}; {a.messages} × 1 KiB on east-1; CPU of east-1 per call")
        print("| call | through | broker CPU ms a call | wall ms a call |")
        print("|---|---|---:|---:|")
        for what, how, (cpu, wall) in rows:
            print(f"| {what} | {how} | {cpu:.1f} | {wall:.1f} |")
        read = {how: cpu for what, how, (cpu, _) in rows if what == "read ScheduledCount"}
        print(f"jolokia_vs_core_read_cpu: {read['Jolokia'] / max(read['Core'], 0.01):.1f}")
        basic, session = read["Jolokia, kept connection, basic auth"], read["Jolokia, kept connection, session"]
        print(f"jolokia_basic_vs_session_read_cpu: {basic / max(session, 0.01):.1f}")
    finally:
        if core:
            core.close()
        for q in (src, staging):
            bl.delete_queue(east, q)


if __name__ == "__main__":
    main()
