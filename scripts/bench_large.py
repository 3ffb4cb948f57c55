#!/usr/bin/env python3
"""One large message, east-1 -> west-1 (issue 29: "a 1 GiB message moved and copied with worker RSS <= 64 MiB").

A body file of --size-mib MiB of random bytes is written once (target/bench-large) and its SHA-256 taken. Then, each
on its own fresh pair of queues:

- the peer: the official JMS client (scripts/java/BenchStream.java) sends the file as one persistent BytesMessage,
  streamed from disk (JMS_AMQ_InputStream: a large message sent in chunks, never a whole-body array); `artemis
  transfer` moves it (its JVM at -Xmx512m, as every peer run here). Timed from its start to its end less its
  trailing receive timeout; its resident memory sampled every 0.2 s. If it fails, what it said (its exception, without
  the stack frames) is printed and its whole output kept in target/bench-large-peer.log. `--peer-heap` sets its -Xmx.
- ours, a move: the same message produced the same way; a worker (`--concurrency 2`, rate limits lifted, its spool
  in target/bench-large/spool) runs a whole-queue move, timed from execute to the run's `ended_at`; the worker's
  VmRSS sampled every 0.2 s and its VmHWM read at the end.
- ours, a copy: the same on a fresh pair of queues.

Census of each: one message on the target (a move leaves none on the source, a copy one), read back by the JMS client
streaming its body to a file (JMS_AMQ_SaveStream) whose size and SHA-256 must equal the original's. MB/s is 10^6
bytes a second. The last lines are `large_<side>_mb_s: x`, `large_worker_rss_peak_mib: x` (the higher of the move's
and the copy's VmHWM; the issue's bound is 64) and `large_move_speed_ratio: x` (ours / the peer's MB/s). Exit 0 when
every side that ran had an exact census and our runs succeeded.

Run through `scripts/bench large [--size-mib 1024] [--batch 200] [--skip-peer] [--peer-heap 512m]` (release build,
test bed up). It needs about six times the body's size free on disk (the file, both brokers' large-message folders,
the spool, the read-back file) and refuses to start with less; everything it made is deleted at the end.
"""
import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib as bl  # noqa: E402  (shared: test bed env, Jolokia, the peer, Java helpers, our database, a run)

WORK = os.path.join(bl.ROOT, "target", "bench-large")
MIB = 1 << 20


def parse_args():
    ap = argparse.ArgumentParser(description="one large message moved and copied by ours, moved by the peer")
    ap.add_argument("--size-mib", type=int, default=1024, help="the body's size in MiB (default 1024)")
    ap.add_argument("--batch", type=int, default=200, help="our batch_size (default 200)")
    ap.add_argument("--skip-peer", action="store_true", help="ours only")
    ap.add_argument("--node-calls", type=float, default=1000.0, help="our per-node management calls/s (default 1000)")
    ap.add_argument("--peer-receive-timeout", type=int, default=5000, help="the peer's --receive-timeout in ms")
    ap.add_argument("--peer-heap", default="512m",
                    help="the peer JVM's -Xmx (default 512m, as every peer run here; at 512m it cannot send 1 GiB: "
                         "docs/BENCHMARKS.md)")
    ap.add_argument("--run-timeout", type=float, default=3600.0, help="seconds a side may take (default 3600)")
    return ap.parse_args()


def write_body(path, size):
    """`size` random bytes written to `path` a MiB at a time; returns their SHA-256."""
    sha = hashlib.sha256()
    with open(path, "wb") as f:
        left = size
        while left:
            chunk = os.urandom(min(MIB, left))
            sha.update(chunk)
            f.write(chunk)
            left -= len(chunk)
    return sha.hexdigest()


def java(classpath, *args, timeout=None):
    return subprocess.run(["java", "-Xmx128m", "-cp", classpath, "BenchStream", *args], check=True,
                          capture_output=True, text=True, timeout=timeout)


def credentials(n):
    return ["--url", n["core_url"], "--user", n["user"], "--password", n["password"]]


def produce_large(classpath, n, queue, body_path):
    t = time.time()
    java(classpath, "produce-file", *credentials(n), "--queue", queue, "--file", body_path)
    return time.time() - t


def read_back(classpath, n, queue):
    """The target's message streamed to a file by the JMS client: (size, sha256), or None when none came."""
    path = os.path.join(WORK, "readback.bin")
    try:
        out = java(classpath, "consume-file", *credentials(n), "--queue", queue, "--file", path,
                   "--timeout-ms", "30000").stdout.split()
    finally:
        if os.path.exists(path):
            os.remove(path)
    return None if out == ["none"] else (int(out[1]), out[3])


def census(classpath, east, west, src, dst, size, sha, left_expected):
    """What the target holds and the source kept, read before the read-back empties the target."""
    on_target, left = bl.queue_count(west, "west-1", dst), bl.queue_count(east, "east-1", src)
    body = read_back(classpath, west, dst) if on_target else None
    ok = on_target == 1 and left == left_expected and body == (size, sha)
    body_words = "no body read back" if body is None else (
        f"body {body[0]:,} bytes sha256 {body[1][:16]}… "
        f"{'equal to the original' if body == (size, sha) else 'DIFFERENT'}")
    return ok, f"{on_target} on the target, {left} left on the source, {body_words}{'' if ok else ' — census WRONG'}"


def mb_s(size, secs):
    return size / 1e6 / secs


def kib_words(kib):
    return "unknown" if kib is None else f"{kib / 1024:.1f} MiB"


def peer_side(args, env, classpath, east, west, tag, body_path, size, sha):
    src, dst = f"bench.large.{tag}.peer.src", f"bench.large.{tag}.peer.dst"
    bl.create_queue(east, src)
    bl.create_queue(west, dst)
    try:
        produced = produce_large(classpath, east, src, body_path)
        log_path = os.path.join(bl.ROOT, "target", "bench-large-peer.log")  # kept: it says how the peer failed
        with open(log_path, "w") as log:
            started = time.time()
            peer = bl.start_artemis(env, *bl.peer_transfer_args(east, src, west, dst,
                                                                receive_timeout_ms=args.peer_receive_timeout),
                                    stdout=log, stderr=subprocess.STDOUT, heap=args.peer_heap)
            rss = bl.RssSampler(peer.pid).start()
            try:
                code = peer.wait(timeout=args.run_timeout)
            except subprocess.TimeoutExpired:
                peer.kill()
                code = "killed after --run-timeout"
            rss.stop()
        # Its trailing receive timeout is part of a run that ended by itself, not of one that failed.
        secs = time.time() - started - (args.peer_receive_timeout / 1000.0 if code == 0 else 0.0)
        ok, words = census(classpath, east, west, src, dst, size, sha, 0)
        with open(log_path) as f:
            # What it said, without the stack frames (the exception and its causes).
            tail = [line.rstrip() for line in f if line.strip() and not line.lstrip().startswith(("at ", "..."))][-8:]
        ok = ok and code == 0
        print(f"peer move: produced in {produced:.1f} s; artemis transfer exit {code} in {secs:.1f} s "
              f"({mb_s(size, secs) if code == 0 else 0:.1f} MB/s); JVM RSS peak {kib_words(rss.peak)} (sampled, "
              f"-Xmx{args.peer_heap}); {words}", flush=True)
        if code != 0 or not ok:
            print("peer output, last lines:\n  " + "\n  ".join(tail or ["(none)"]), flush=True)
        return {"ok": ok, "secs": secs, "rss_kib": rss.peak}
    finally:
        delete_queues(east, west, src, dst)


def ours_side(args, env, classpath, east, west, penv, run, tag, body_path, size, sha, copy):
    mode = "copy" if copy else "move"
    src, dst = f"bench.large.{tag}.ours.{mode}.src", f"bench.large.{tag}.ours.{mode}.dst"
    bl.create_queue(east, src)
    bl.create_queue(west, dst)
    try:
        produced = produce_large(classpath, east, src, body_path)
        previewed = bl.preview(run, src, dst, copy=copy)
        worker = bl.start_worker(args.binary, penv, os.path.join(WORK, f"worker-{mode}.log"))
        try:
            time.sleep(1.0)  # the worker connected and polling before the clock starts, as in bench_move.py
            rss = bl.RssSampler(worker.pid).start()
            started = time.time()
            bl.execute(run, previewed, src)
            state = bl.wait_run(penv, previewed["run_id"], timeout=args.run_timeout)
            ended = bl.run_ended_at(penv, previewed["run_id"])
            rss.stop()
            hwm = rss.hwm_kib()
        finally:
            bl.stop_worker(worker)
        secs = ended - started if ended is not None else None
        ok, words = census(classpath, east, west, src, dst, size, sha, 1 if copy else 0)
        ok = ok and state == "succeeded"
        timing = f"{secs:.1f} s ({mb_s(size, secs):.1f} MB/s)" if secs else "no end time"
        print(f"ours {mode}: produced in {produced:.1f} s; run {state or 'not ended'} in {timing}; worker RSS peak "
              f"{kib_words(hwm)} (VmHWM), sampled max {kib_words(rss.peak)} ({rss.samples} samples); {words}",
              flush=True)
        return {"ok": ok, "secs": secs, "rss_kib": hwm}
    finally:
        delete_queues(east, west, src, dst)
        shutil.rmtree(os.path.join(WORK, "spool"), ignore_errors=True)


def delete_queues(east, west, src, dst):
    for n, q in ((east, src), (west, dst)):
        try:
            bl.delete_queue(n, q)
        except Exception as e:  # never created, or already gone
            print(f"  could not delete {q}: {e}", flush=True)


def main():
    args = parse_args()
    args.binary = bl.RELEASE_BINARY
    size = args.size_mib * MIB
    os.makedirs(WORK, exist_ok=True)
    free = shutil.disk_usage(WORK).free
    if free < 6 * size:
        print(f"only {free / 2**30:.1f} GiB free on the disk of {WORK}: a {args.size_mib} MiB message needs about "
              f"{6 * size / 2**30:.1f} GiB (the file, both brokers, the spool, the read-back). Free some, or pass a "
              "smaller --size-mib.", file=sys.stderr)
        return 2
    env = bl.testbed_env()
    east, west = bl.node(env, "east-1"), bl.node(env, "west-1")
    classpath = bl.build_java(env, "BenchStream")
    stamp = int(time.time())
    print(bl.header_words("large"), flush=True)
    print(f"one message of {args.size_mib} MiB ({size:,} bytes) east-1 -> west-1; batch {args.batch}; "
          f"{free / 2**30:.0f} GiB free; ours: {bl.binary_words(args.binary)}", flush=True)
    body_path = os.path.join(WORK, "body.bin")
    t = time.time()
    sha = write_body(body_path, size)
    print(f"body file written in {time.time() - t:.1f} s, sha256 {sha[:16]}…", flush=True)
    database = f"artemis_transfer_bench_large_{os.getpid()}"
    penv, run = bl.ours(env, east, west, args.binary, args.batch, args.node_calls, database=database)
    penv["ARTEMIS_TRANSFER__WORKER__SPOOL_DIR"] = os.path.join(WORK, "spool")
    results = {}
    try:
        if not args.skip_peer:
            results["peer_move"] = peer_side(args, env, classpath, east, west, stamp, body_path, size, sha)
        results["ours_move"] = ours_side(args, env, classpath, east, west, penv, run, stamp, body_path, size, sha,
                                         copy=False)
        results["ours_copy"] = ours_side(args, env, classpath, east, west, penv, run, stamp, body_path, size, sha,
                                         copy=True)
    finally:
        bl.drop_database(env, database)
        shutil.rmtree(WORK, ignore_errors=True)
    print(f"load average at the end {bl.loadavg_words()}", flush=True)
    for key in ("peer_move", "ours_move", "ours_copy"):
        r = results.get(key)
        if r is not None:
            value = f"{mb_s(size, r['secs']):.1f}" if r["ok"] and r["secs"] else "unknown"
            print(f"large_{key}_mb_s: {value}", flush=True)
    hwms = [results[k]["rss_kib"] for k in ("ours_move", "ours_copy") if results[k]["rss_kib"] is not None]
    print(f"large_worker_rss_peak_mib: {max(hwms) / 1024:.1f}" if hwms else "large_worker_rss_peak_mib: unknown")
    peer, ours = results.get("peer_move"), results["ours_move"]
    if peer is not None:
        counted = peer["ok"] and ours["ok"]
        print(f"large_move_speed_ratio: {peer['secs'] / ours['secs']:.2f}" if counted else
              "large_move_speed_ratio: unknown (a side failed or its census was wrong)", flush=True)
    return 0 if all(r["ok"] for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
