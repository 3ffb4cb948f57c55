#!/usr/bin/env python3
"""Where the CPU goes (issue 29): one move (or copy) of N messages east-1 → west-1 by the peer and by ours, each
after its own queue was produced, with the CPU seconds each process spent during the transfer alone: the source
broker, the target broker, Postgres (every backend), our worker, and this script's children (the peer's JVM; our CLI and psql calls). On 2 cores both tools are
bounded by the CPU they make the brokers spend, so this says how fast each could be on this machine at best, and
which side of a move its time is spent on. Prints per side: seconds, msg/s, CPU seconds per process group and per
1,000 messages, and the share of the machine's two cores that was busy.

Run through `scripts/bench cpu [--messages N] [--size BYTES] [--batch B] [--copy] [--binary PATH] [--only ours]
[--threads] [--profile DIR]` (test bed up). With `--threads`, each broker's CPU while ours runs is also split by its
threads' names (the JVM's pools: Jetty's HTTP threads, the broker's executors, the journal, Netty, the collector, the
JIT compiler). With `--profile`, each broker's JVM records a Java Flight Recorder profile while ours runs
(`DIR/source.jfr`, `DIR/target.jfr`) and the script prints where each broker's CPU samples fell, by the frames that
say what the broker was doing for us (`profile_buckets`); JFR samples only threads running Java code.
"""
import argparse
import os
import resource
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib as bl  # noqa: E402

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    """utime + stime of `pid` (its threads included), 0 when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICKS
    except OSError:
        return 0.0


def postgres_pids():
    out = subprocess.run(["pgrep", "-f", "postgres"], capture_output=True, text=True).stdout.split()
    return [int(p) for p in out]


def broker_pid(name):
    with open(os.path.join(bl.ROOT, "target", "testbed", "state", f"{name}.pid")) as f:
        return int(f.read().strip())


class Meter:
    """CPU seconds of the brokers, Postgres, a worker and this script's children, between start() and stop()."""

    def __init__(self, worker=None):
        self.worker = worker

    def sample(self):
        s = {"source broker": cpu_seconds(broker_pid("east-1")), "target broker": cpu_seconds(broker_pid("west-1")),
             "postgres": sum(cpu_seconds(p) for p in postgres_pids())}
        s["worker"] = cpu_seconds(self.worker.pid) if self.worker else 0.0
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        s["children"] = children.ru_utime + children.ru_stime
        s["wall"] = time.time()
        return s

    def start(self):
        self.before = self.sample()

    def stop(self):
        after = self.sample()
        return {k: after[k] - self.before[k] for k in after}


# Java samples every millisecond (JFR's `profile` settings take one every 10 ms, too few for a run of seconds).
CPU_SETTINGS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "java", "cpu.jfc")


class Recording:
    """A Java Flight Recorder profile of the source and target brokers, from its making to `stop`."""

    BROKERS = {"source": "east-1", "target": "west-1"}

    def __init__(self, folder):
        self.folder = os.path.abspath(folder)
        os.makedirs(self.folder, exist_ok=True)
        for broker in self.BROKERS.values():
            jcmd(broker, "JFR.start", "name=bench", f"settings={CPU_SETTINGS}")

    def stop(self):
        for side, broker in self.BROKERS.items():
            path = os.path.join(self.folder, f"{side}.jfr")
            jcmd(broker, "JFR.stop", "name=bench", f"filename={path}")
            print(f"{side} broker's profile: {path}", flush=True)
            subprocess.run([sys.executable, os.path.join(os.path.dirname(__file__), "profile_buckets.py"), path],
                           check=False)


def thread_cpu(pid):
    """CPU seconds of each of `pid`'s threads, by thread id: (name, seconds)."""
    spent = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                text = f.read()
        except OSError:
            continue
        name = text[text.index("(") + 1:text.rindex(")")]
        fields = text.rsplit(")", 1)[1].split()
        spent[tid] = (name, (int(fields[11]) + int(fields[12])) / TICKS)
    return spent


def report_threads(side, n, before, after):
    """A broker's CPU between two `thread_cpu` snapshots, by thread name with its numbers taken out."""
    by_pool = {}
    for tid, (name, seconds) in after.items():
        pool = "".join("#" if c.isdigit() else c for c in name)
        by_pool[pool] = by_pool.get(pool, 0.0) + seconds - before.get(tid, (name, 0.0))[1]
    print(f"{side} broker's CPU by thread (ms per 1,000 messages):", flush=True)
    for pool, seconds in sorted(by_pool.items(), key=lambda kv: -kv[1]):
        if seconds >= 0.02:
            print(f"  {1e6 * seconds / n:6.1f}  {pool}", flush=True)


def jcmd(broker, *command):
    subprocess.run(["jcmd", str(broker_pid(broker)), *command], check=True, capture_output=True)


def report(side, n, spent):
    wall = spent.pop("wall")
    total = sum(spent.values())
    print(f"{side}: {wall:.1f} s, {n / wall:,.0f} msg/s, the two cores {100 * total / (2 * wall):.0f} % busy "
          f"(this machine, all processes: see loadavg)", flush=True)
    for k, v in spent.items():
        if v > 0.05:
            print(f"  {k:14} {v:7.1f} CPU s  {1e6 * v / n:6.1f} ms per 1,000 messages", flush=True)
    print(f"  {'total':14} {total:7.1f} CPU s  {1e6 * total / n:6.1f} ms per 1,000 messages", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=50_000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=200)
    ap.add_argument("--copy", action="store_true")
    ap.add_argument("--binary", default=bl.RELEASE_BINARY)
    ap.add_argument("--only", choices=["ours"], help="skip the peer")
    ap.add_argument("--threads", action="store_true", help="split each broker's CPU by its threads' names")
    ap.add_argument("--profile", metavar="DIR", help="record the brokers' JFR profiles of ours into DIR")
    args = ap.parse_args()
    env = bl.testbed_env()
    east, west = bl.node(env, "east-1"), bl.node(env, "west-1")
    tag = str(int(time.time()))
    print(f"load {os.getloadavg()[0]:.2f}; {args.messages} × {args.size} B, batch {args.batch}, "
          f"{'copy' if args.copy else 'move'}", flush=True)
    if args.only != "ours":
        peer(env, east, west, tag, args)
    ours(env, east, west, tag, args)


def peer(env, east, west, tag, args):
    """The peer's move (or copy) of its own queue, metered."""
    src, dst = f"cpu.peer.{tag}", f"cpu.peer.{tag}.out"
    bl.create_queue(east, src), bl.create_queue(west, dst)
    bl.produce(env, east, src, args.messages, args.size)
    meter = Meter()
    meter.start()
    # The peer's trailing receive wait is inside its CPU: it is idle then.
    seconds = bl.peer_transfer(env, east, src, west, dst, commit_interval=args.batch, copy=args.copy,
                               receive_timeout_ms=2000)
    spent = meter.stop()
    spent["wall"] = seconds
    report("peer", args.messages, spent)
    bl.delete_queue(east, src), bl.delete_queue(west, dst)


def ours(env, east, west, tag, args):
    """Our move (or copy) of its own queue, metered, and profiled with `--profile`."""
    penv, run = bl.ours(env, east, west, args.binary, args.batch, 1000.0, database="artemis_transfer_cpu")
    src, dst = f"cpu.ours.{tag}", f"cpu.ours.{tag}.out"
    bl.create_queue(east, src), bl.create_queue(west, dst)
    worker = None
    try:
        # The queues are removed whatever fails from here: a source left full on a 512 MiB broker fails the next
        # benchmark (it did once, when this folder was missing).
        bl.produce(env, east, src, args.messages, args.size)
        os.makedirs("/tmp/cpu", exist_ok=True)
        worker = bl.start_worker(args.binary, penv, "/tmp/cpu/worker.log")
        previewed = bl.preview(run, src, dst, copy=args.copy)
        meter = Meter(worker)
        recording = Recording(args.profile) if args.profile else None
        threads = {side: thread_cpu(broker_pid(b)) for side, b in Recording.BROKERS.items()} if args.threads else None
        meter.start()
        t = time.time()
        bl.execute(run, previewed, src)
        state = bl.wait_run(penv, previewed["run_id"], timeout=1800)
        spent = meter.stop()
        if recording:
            recording.stop()
        if threads:
            for side, broker in Recording.BROKERS.items():
                report_threads(side, args.messages, threads[side], thread_cpu(broker_pid(broker)))
        ended = bl.run_ended_at(penv, previewed["run_id"]) or time.time()
        spent["wall"] = ended - t
        print(f"ours ended {state}", flush=True)
        report("ours", args.messages, spent)
    finally:
        if worker:
            bl.stop_worker(worker)
        bl.delete_queue(east, src), bl.delete_queue(west, dst)
        bl.drop_database(env, "artemis_transfer_cpu")


if __name__ == "__main__":
    main()
