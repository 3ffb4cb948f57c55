#!/usr/bin/env python3
"""Four runs at once against four peers at once (issue 29: "Four concurrent runs from four queues against four
concurrent peers: aggregate ratio >= 1.0").

Each repetition first produces 2 x --runs source queues of N messages on east-1 (the peer's and ours interleaved, so
neither group's queues are all the ones produced last, which page first), then runs the two groups one after the
other, the peer group first in odd repetitions and ours first in even ones, each group's queues deleted as soon as its
census is taken (a west-1 still holding the first group's 100,000 messages pages the second's, and twice ran out of
its 512 MiB heap: docs/BENCHMARKS.md):

- the peer group: --runs `artemis transfer --commit-interval B` processes started together, each moving its own
  queue to its own queue on west-1. A process's end is when it exited less its trailing receive timeout.
- our group: --runs whole-queue move runs (previewed before the clock starts), executed one after another as fast as
  the CLI returns, run by --workers worker processes of --concurrency jobs each (rate limits lifted, batch_size B).
  A run's end is its `ended_at`.

A group's aggregate speed is all its messages over (its last end - its first start). Each queue's census must be
exact (N on its target, none left on its source) and every run of ours `succeeded`, or the repetition does not count.
It prints each repetition's aggregates and the spread of the single runs' times (how evenly the group shared the
brokers), the load average, and last `concurrent_speed_ratio: x`, the median over counted repetitions of our aggregate
speed / the peer's (higher is better for us). Exit 0 when every repetition counted.

Run through `scripts/bench concurrent [--messages 25000] [--runs 4] [--batch 200] [--reps 3] [--workers 1]
[--concurrency 4]` (release build, test bed up).
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib as bl  # noqa: E402  (shared: test bed env, Jolokia, produce, the peer, our database, a run)


def parse_args():
    ap = argparse.ArgumentParser(description="concurrent runs of ours against as many concurrent peers")
    ap.add_argument("--messages", type=int, default=25_000, help="messages per queue (default 25,000)")
    ap.add_argument("--size", type=int, default=1024, help="body size in bytes (default 1024)")
    ap.add_argument("--batch", type=int, default=200,
                    help="the peer's --commit-interval and our batch_size (default 200)")
    ap.add_argument("--runs", type=int, default=4, help="concurrent runs on each side (default 4)")
    ap.add_argument("--reps", type=int, default=3, help="alternated repetitions (default 3)")
    ap.add_argument("--workers", type=int, default=1, help="our worker processes (default 1)")
    ap.add_argument("--concurrency", type=int, default=4,
                    help="jobs each worker runs at once (`worker --concurrency`; default 4, the product's default)")
    ap.add_argument("--node-calls", type=float, default=1000.0, help="our per-node management calls/s (default 1000)")
    ap.add_argument("--peer-receive-timeout", type=int, default=5000,
                    help="the peers' --receive-timeout in ms, subtracted from their ends (default 5000)")
    ap.add_argument("--run-timeout", type=float, default=1800.0, help="seconds a group may take (default 1800)")
    return ap.parse_args()


def heap_words(n):
    """The broker's heap in use (what the 512 MiB brokers have left is what a long benchmark runs out of)."""
    try:
        return f"{bl.heap_used(n) / 2**20:.0f} MiB"
    except Exception:
        return "unknown (no answer)"


def queue_names(stamp, rep, side, i):
    return f"bench.conc.{stamp}.r{rep}.{side}{i}.src", f"bench.conc.{stamp}.r{rep}.{side}{i}.dst"


class Bench:
    def __init__(self, args):
        self.args = args
        self.env = bl.testbed_env()
        self.east, self.west = bl.node(self.env, "east-1"), bl.node(self.env, "west-1")
        self.database = f"artemis_transfer_bench_concurrent_{os.getpid()}"
        self.penv, self.run = bl.ours(self.env, self.east, self.west, args.binary, args.batch, args.node_calls,
                                      database=self.database)

    def census(self, src, dst):
        """(exact, words) for one queue pair of a move."""
        on_target = bl.queue_count(self.west, "west-1", dst)
        left = bl.queue_count(self.east, "east-1", src)
        ok = on_target == self.args.messages and left == 0
        return ok, f"{on_target}/{left}"

    def peer_group(self, queues):
        """All peers started together; each one's end taken when it exits (polled every 50 ms)."""
        a = self.args
        procs, starts, ends = [], [], {}
        for src, dst in queues:
            starts.append(time.time())
            procs.append(bl.start_artemis(self.env, *bl.peer_transfer_args(
                self.east, src, self.west, dst, commit_interval=a.batch, receive_timeout_ms=a.peer_receive_timeout)))
        deadline = time.time() + a.run_timeout
        while len(ends) < len(procs) and time.time() < deadline:
            for i, p in enumerate(procs):
                if i not in ends and p.poll() is not None:
                    ends[i] = time.time() - a.peer_receive_timeout / 1000.0
            time.sleep(0.05)
        for i, p in enumerate(procs):
            if i not in ends:
                p.kill()
                p.wait()
        exited_ok = all(p.returncode == 0 for p in procs) and len(ends) == len(procs)
        return self.group_result("peer", queues, starts, [ends.get(i) for i in range(len(procs))], exited_ok)

    def ours_group(self, queues):
        a = self.args
        previews = [bl.preview(self.run, src, dst) for src, dst in queues]
        log_dir = os.path.join(bl.ROOT, "target")
        workers = [bl.start_worker(a.binary, self.penv, os.path.join(log_dir, f"bench-concurrent-worker{w}.log"),
                                   name=f"bench{w}", concurrency=a.concurrency) for w in range(a.workers)]
        samplers = [bl.RssSampler(w.pid).start() for w in workers]
        try:
            time.sleep(1.0)  # the workers connected and polling before the clock starts, as in bench_move.py
            starts = []
            for previewed, (src, _) in zip(previews, queues):
                starts.append(time.time())
                bl.execute(self.run, previewed, src)
            deadline = time.time() + a.run_timeout
            states = [bl.wait_run(self.penv, p["run_id"], timeout=max(1.0, deadline - time.time())) for p in previews]
            ends = [bl.run_ended_at(self.penv, p["run_id"]) for p in previews]
            for s in samplers:
                s.stop()
            hwms = [s.hwm_kib() for s in samplers]
        finally:
            for w in workers:
                bl.stop_worker(w)
        for p, state in zip(previews, states):
            if state is None:
                self.run("stop", p["run_id"], "--reason", "benchmark timeout")
                bl.wait_run(self.penv, p["run_id"], timeout=120)
        result = self.group_result("ours", queues, starts, ends, all(s == "succeeded" for s in states))
        result["words"] += (f"; runs {', '.join(s or 'not ended' for s in states)}; worker RSS peak "
                            f"{', '.join('unknown' if h is None else f'{h / 1024:.1f} MiB' for h in hwms)}")
        return result

    def group_result(self, side, queues, starts, ends, ended_well):
        n = self.args.messages
        censuses = [self.census(src, dst) for src, dst in queues]
        ok = ended_well and all(c[0] for c in censuses) and None not in ends
        secs = max(ends) - min(starts) if None not in ends else None
        singles = sorted(e - s for s, e in zip(starts, ends)) if None not in ends else []
        rate = len(queues) * n / secs if secs else None
        words = (f"{side}: {len(queues)} x {n:,} in {secs:.1f} s = {rate:,.0f} msg/s aggregate; single runs "
                 f"{', '.join(f'{x:.1f}' for x in singles)} s" if secs else f"{side}: no end time")
        words += f"; census (target/left) {' '.join(c[1] for c in censuses)}{'' if ok else ' WRONG'}"
        return {"ok": ok, "rate": rate, "words": words}

    def repetition(self, rep, stamp):
        a = self.args
        sides = {side: [queue_names(stamp, rep, side, i) for i in range(a.runs)] for side in ("peer", "ours")}
        order = ("peer", "ours") if rep % 2 == 1 else ("ours", "peer")
        results = {}
        try:
            t = time.time()
            for i in range(a.runs):
                for side in order:
                    src, dst = sides[side][i]
                    bl.create_queue(self.west, dst)
                    bl.produce(self.env, self.east, src, a.messages, a.size)
            produced = time.time() - t
            paging = sum(1 for qs in sides.values() for src, _ in qs if bl.address_paging(self.east, src))
            load = bl.loadavg_words()
            for side in order:
                results[side] = self.peer_group(sides[side]) if side == "peer" else self.ours_group(sides[side])
                # Its census taken: its queues go, so the next group writes into a target that holds none of them
                # (a west-1 full of the first group's messages pages the second's, and its 512 MiB heap ran out).
                self.delete_queues(sides.pop(side))
        finally:
            for qs in sides.values():
                self.delete_queues(qs)
        counted = results["peer"]["ok"] and results["ours"]["ok"]
        ratio = results["ours"]["rate"] / results["peer"]["rate"] if counted else None
        print(f"rep {rep}/{a.reps} ({order[0]} first; {2 * a.runs} queues produced in {produced:.1f} s, {paging} of "
              f"them paging; load {load} -> {bl.loadavg_words()}; heap in use after the queues were deleted: "
              f"{heap_words(self.east)} east-1, {heap_words(self.west)} west-1):\n  {results['peer']['words']}\n  "
              f"{results['ours']['words']}\n  " + (f"ours/peer aggregate speed {ratio:.2f}" if counted else
                                                   "NOT COUNTED"), flush=True)
        return ratio

    def delete_queues(self, queues):
        for src, dst in queues:
            for n, q in ((self.east, src), (self.west, dst)):
                try:
                    bl.delete_queue(n, q)
                except Exception as e:  # never created; the next repetition uses new names
                    print(f"  could not delete {q}: {e}", flush=True)

    def close(self):
        bl.drop_database(self.env, self.database)


def main():
    args = parse_args()
    args.binary = bl.RELEASE_BINARY
    stamp = int(time.time())
    print(bl.header_words("concurrent"), flush=True)
    print(f"{args.runs} runs a side, each {args.messages:,} x {args.size} B east-1 -> west-1, B = {args.batch}; ours: "
          f"{bl.binary_words(args.binary)}, {args.workers} worker(s) x --concurrency {args.concurrency}; the peer: "
          f"artemis transfer --commit-interval {args.batch} --receive-timeout {args.peer_receive_timeout}", flush=True)
    bench = Bench(args)
    try:
        ratios = [bench.repetition(rep, stamp) for rep in range(1, args.reps + 1)]
    finally:
        bench.close()
    counted = [r for r in ratios if r is not None]
    print(f"ratios: {', '.join('not counted' if r is None else f'{r:.2f}' for r in ratios)}", flush=True)
    print(f"concurrent_speed_ratio: {statistics.median(counted):.2f}" if counted else
          "concurrent_speed_ratio: unknown (no repetition counted)", flush=True)
    return 0 if len(counted) == len(ratios) else 1


if __name__ == "__main__":
    sys.exit(main())
