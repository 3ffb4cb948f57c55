#!/usr/bin/env python3
"""The move benchmark (issue 6): N messages of SIZE bytes from east-1 to west-1, side by side with the peer that
ships with Artemis (`artemis transfer`, a JMS consumer/producer loop committing every 1,000 messages: at-least-once,
no staging, no dedup, no resume).

For our move it samples, every half second, the staging queue's depth (Jolokia MessageCount) and the worker's
resident memory (/proc/<pid>/status VmRSS), and reports the peak of both, the time from execute to the run's end,
and the census (messages on the target; none left on the source). The last line is
`move_ratio_vs_artemis_transfer: <our seconds / peer seconds>` (lower is better).

Run through `scripts/bench move [--messages N] [--size BYTES] [--batch N] [--skip-peer] [--target west-1|secure-1]`
(release build, test bed up). `--target secure-1` moves into the test bed's TLS node instead (Core over TLS, Jolokia
over HTTPS with the client certificate; the peer is skipped): the same move over TLS beside plain.
"""
import argparse
import base64
import json
import os
import ssl
import subprocess
import sys
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import ROOT, artemis, produce, rss_kib, testbed_env, wait_run  # noqa: E402  (shared with the others)
from benchlib import ours as bl_ours  # noqa: E402


def node(env, name):
    key = name.upper().replace("-", "_")
    n = {k: env[f"TESTBED_NODE_{key}_{k.upper()}"] for k in ("core_url", "jolokia_url", "user", "password")}
    n["name"], n["cluster"] = name, env[f"TESTBED_NODE_{key}_CLUSTER"]
    # What the product registers: for the TLS node, its Core URL with the client certificate too (its HTTPS Jolokia
    # requires one, and the registry gives an endpoint's Jolokia the TLS material of its Core URL).
    n["registered_core_url"] = n["core_url"]
    n["tls"] = None
    if "sslEnabled=true" in n["core_url"]:
        pki = os.path.dirname(env["TESTBED_TLS_CA_PEM"])
        n["registered_core_url"] += f"&keyStoreType=PEM&keyStorePath={pki}/client-bundle.pem"
        context = ssl.create_default_context(cafile=env["TESTBED_TLS_CA_PEM"])
        context.load_cert_chain(env["TESTBED_TLS_CLIENT_CERT_PEM"], env["TESTBED_TLS_CLIENT_KEY_PEM"])
        n["tls"] = context
    return n


def jolokia_read(n, mbean, attribute):
    body = json.dumps({"type": "read", "mbean": mbean, "attribute": attribute}).encode()
    req = urllib.request.Request(n["jolokia_url"] + "/", data=body, method="POST")
    auth = base64.b64encode(f"{n['user']}:{n['password']}".encode()).decode()
    req.add_header("Authorization", "Basic " + auth)
    req.add_header("Origin", "http://127.0.0.1")
    req.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(req, timeout=10, context=n["tls"]) as r:
        return json.load(r).get("value")


def queue_count(n, broker, queue):
    mbean = (f'org.apache.activemq.artemis:broker="{broker}",component=addresses,address="{queue}",'
             f'subcomponent=queues,routing-type="anycast",queue="{queue}"')
    try:
        v = jolokia_read(n, mbean, "MessageCount")
        return int(v) if v is not None else None
    except Exception:
        return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", type=int, default=1_000_000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=200)
    ap.add_argument("--skip-peer", action="store_true")
    ap.add_argument("--target", default="west-1", choices=["west-1", "secure-1"],
                    help="the target node: west-1 (plain TCP) or secure-1 (TLS; no peer run)")
    ap.add_argument("--copy", action="store_true",
                    help="a copy instead of a move (no peer: `artemis transfer` only moves); reports browse deliveries")
    # The peer has no rate limits: ours are lifted too (messages per second always; management calls per
    # second unless given), so the comparison is of the mechanisms. Default policy: see docs/BENCHMARKS.md.
    ap.add_argument("--node-calls", type=float, default=1000.0,
                    help="the per-node management calls/s setting for our run (default 1000; the product's is 20)")
    args = ap.parse_args()

    env = testbed_env()
    east, west = node(env, "east-1"), node(env, args.target)
    binary = os.path.join(ROOT, "target", "release", "artemis-transfer")
    stamp = int(time.time())
    print(f"machine: {os.cpu_count()} cores; {args.messages} messages of {args.size} bytes, east-1 -> {west['name']}, "
          f"batch {args.batch}, node calls/s {args.node_calls:g}", flush=True)

    peer_secs = None
    if not args.skip_peer and not args.copy and not west["tls"]:
        src, dst = f"bench.peer.src.{stamp}", f"bench.peer.dst.{stamp}"
        t = time.time()
        produce(env, east, src, args.messages, args.size)
        print(f"peer: produced in {time.time() - t:.1f} s", flush=True)
        t = time.time()
        artemis(env, "transfer", "--source-url", east["core_url"], "--source-user", east["user"],
                "--source-password", east["password"], "--source-queue", src,
                "--target-url", west["core_url"], "--target-user", west["user"], "--target-password", west["password"],
                "--target-queue", dst, "--receive-timeout", "2000", "--silent")
        peer_secs = time.time() - t - 2.0  # its loop ends only after one empty receive timeout
        moved = queue_count(west, west["name"], dst)
        left = queue_count(east, "east-1", src)
        print(f"peer: artemis transfer moved {moved} in {peer_secs:.1f} s ({(moved or 0) / peer_secs:,.0f} msg/s); "
              f"{left} left on the source", flush=True)
        for q, n in ((src, east), (dst, west)):
            artemis(env, "queue", "delete", "--url", n["core_url"], "--user", n["user"], "--password", n["password"],
                    "--name", q, "--silent")

    # Ours: a fresh database, both clusters registered, one worker.
    penv, run = bl_ours(env, east, west, binary, args.batch, args.node_calls)
    src, dst = f"bench.ours.src.{stamp}", f"bench.ours.dst.{stamp}"
    t = time.time()
    produce(env, east, src, args.messages, args.size)
    print(f"ours: produced in {time.time() - t:.1f} s", flush=True)
    artemis(env, "queue", "create", "--url", west["core_url"], "--user", west["user"], "--password", west["password"],
            "--name", dst, "--address", dst, "--anycast", "--durable", "--preserve-on-no-consumers",
            "--auto-create-address", "--silent")
    to = f"{west['cluster']}/{west['name']}/{dst}"
    preview = json.loads(run("preview", "--from", f"east/east-1/{src}", "--to", to, "--all",
                             *(["--copy"] if args.copy else []), "--json").stdout)
    acks = [x for f in preview["preview"]["findings"] if f["kind"] == "needs_ack" for x in ("--ack", f["code"])]
    worker = subprocess.Popen([binary, "worker", "--name", "bench", "--concurrency", "2"], env=penv,
                              stdout=subprocess.DEVNULL, stderr=open(os.path.join(ROOT, "target", "bench-worker.log"), "w"))
    time.sleep(1.0)
    staging = f"studio.transfer.{preview['run_id']}"
    peaks = {"staging": 0, "rss": 0, "samples": 0}
    done = threading.Event()

    def sample():
        while not done.is_set():
            d = queue_count(east, "east-1", staging)
            r = rss_kib(worker.pid)
            if d is not None:
                peaks["staging"] = max(peaks["staging"], d)
            if r is not None:
                peaks["rss"] = max(peaks["rss"], r)
            peaks["samples"] += 1
            done.wait(0.5)

    sampler = threading.Thread(target=sample, daemon=True)
    t = time.time()
    run("execute", preview["run_id"], "--plan-hash", preview["plan_hash"], *acks, "--confirm", src, "--override-cap")
    sampler.start()
    state = wait_run(penv, preview["run_id"])
    ours_secs = time.time() - t
    done.set()
    sampler.join()
    hwm = None
    with open(f"/proc/{worker.pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                hwm = int(line.split()[1])
    worker.terminate()
    worker.wait()
    moved = queue_count(west, west["name"], dst)
    left = queue_count(east, "east-1", src)
    print(f"ours: run {state} in {ours_secs:.1f} s ({(moved or 0) / ours_secs:,.0f} msg/s); {moved} on the target, "
          f"{left} left on the source", flush=True)
    print(f"ours: staging depth peak {peaks['staging']} (bound 2 x batch = {2 * args.batch}; "
          f"{peaks['samples']} samples); worker RSS peak {hwm} KiB (VmHWM), sampled max {peaks['rss']} KiB", flush=True)
    for q, n in ((src, east), (dst, west)):
        artemis(env, "queue", "delete", "--url", n["core_url"], "--user", n["user"], "--password", n["password"],
                "--name", q, "--silent")
    if peer_secs:
        print(f"move_ratio_vs_artemis_transfer: {ours_secs / peer_secs:.2f}")
    if args.copy:
        counters = json.loads(subprocess.run(["psql", "-qAt", penv["DATABASE_URL"], "-c",
                                              f"SELECT counters FROM transfer_run WHERE id = '{preview['run_id']}'"],
                                             check=True, capture_output=True, text=True).stdout)
        print(f"ours: copy browsed {counters.get('browsed')} deliveries for {counters.get('delivered')} copied "
              f"({(counters.get('browsed') or 0) / max(1, counters.get('delivered') or 1):.2f} per message); "
              f"copy_secs: {ours_secs:.1f}", flush=True)
        return 0 if state == "succeeded" and moved == args.messages and left == args.messages else 1
    return 0 if state == "succeeded" and moved == args.messages and left == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
