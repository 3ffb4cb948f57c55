#!/usr/bin/env python3
"""Staging from a paged source queue with a sparse filter (issue 6): what a move costs the source broker.

A source queue on east-1 whose address pages beyond 1 MiB (PAGE policy) gets N messages (the official client via
the Java fidelity helper; every 128th message has p_byte = 7), so almost all of it sits in page files. A move of
`p_byte = 7` (about 0.8 % of the queue, spread evenly) runs east-1 -> west-1 while:
- the broker's heap (java.lang:type=Memory HeapMemoryUsage.used) and the staging depth are sampled every 0.5 s;
- a probe producer (scripts/java/ProbeProducer.java) sends one durable 1 KiB message to the same source queue
  every 50 ms, from 10 s before the run to its end, and its send latency is reported before and during the run.
Those probe messages arrive after t0, so the frozen selection never takes them.

Run through `scripts/bench paged [--messages N] [--batch N]` (release build, test bed up). Prints the run's
time, what it moved against what the filter selects, the heap and the latency percentiles; exit 0 when the
run succeeded with exactly the selected messages on the target, 2 when the preview refused the move (a scan that
would not fit in the source broker's free heap: `source-paged-heap`), its words printed.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib as bl  # noqa: E402  (shared helpers: test bed env, Jolokia, our database, a run)

ROOT = bl.ROOT


def percentiles(micros):
    if not micros:
        return "no sends"
    s = sorted(micros)
    pick = lambda q: s[min(len(s) - 1, int(q * len(s)))] / 1000.0  # noqa: E731
    return (f"{len(s)} sends: p50 {pick(0.5):.2f} ms, p99 {pick(0.99):.2f} ms, max {s[-1] / 1000.0:.2f} ms, "
            f"mean {statistics.mean(s) / 1000.0:.2f} ms")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", type=int, default=100_000)
    ap.add_argument("--batch", type=int, default=200)
    ap.add_argument("--node-calls", type=float, default=1000.0)
    args = ap.parse_args()

    env = bl.testbed_env()
    east, west = bl.node(env, "east-1"), bl.node(env, "west-1")
    binary = os.path.join(ROOT, "target", "release", "artemis-transfer")
    stamp = int(time.time())
    src, dst = f"bench.paged.src.{stamp}", f"bench.paged.dst.{stamp}"
    selected = (args.messages - 8) // 128 + 1 if args.messages > 7 else 0
    print(f"machine: {os.cpu_count()} cores; {args.messages} messages on a paging source (max-size-bytes 1 MiB, page-size-bytes 256 KiB), "
          f"filter p_byte = 7 selects {selected}; batch {args.batch}", flush=True)
    classpath = bl.build_java(env, "ProbeProducer")

    broker = 'org.apache.activemq.artemis:broker="east-1"'
    bl.add_paging_limit(east, src)
    bl.create_queue(east, src)
    bl.create_queue(west, dst)
    t = time.time()
    # Durable sends without waiting for each one's confirmation (the session still flushes at close): the queue's
    # content is the same, produced several times faster.
    subprocess.run(["java", "-Xmx256m", "-cp", classpath, "Fidelity", "produce", "--url",
                    east["core_url"] + "?blockOnDurableSend=false",
                    "--user", east["user"], "--password", east["password"], "--queue", src, "--count",
                    str(args.messages), "--prefix", "paged-", "--kinds", "bytes", "--body-size", "0"],
                   check=True, stdout=subprocess.DEVNULL)
    address = f'{broker},component=addresses,address="{src}"'
    paging = bl.jolokia_read(east, address, "Paging")
    pages = bl.jolokia_read(east, address, "NumberOfPages")
    print(f"produced in {time.time() - t:.1f} s; address paging: {paging}, {pages} page files", flush=True)

    penv, run = bl.ours(env, east, west, binary, args.batch, args.node_calls)
    # Exit 4 is a preview that refused the run, 3 one whose node did not answer: its findings are still printed as
    # JSON (docs/cli.md, "Exit status").
    previewed = subprocess.run([binary, "preview", "--from", f"east/east-1/{src}", "--to", f"west/west-1/{dst}",
                                "--filter", "p_byte = 7", "--json"], capture_output=True, text=True, env=penv)
    if previewed.returncode not in (0, 3, 4):
        raise RuntimeError(f"preview failed ({previewed.returncode}): {previewed.stderr}")
    preview = json.loads(previewed.stdout)
    findings = preview["preview"]["findings"]
    for f in findings:
        if f["code"].startswith("source-paged"):
            print(f"preview: {f['kind']} {f['code']}: {f['words']}", flush=True)
    if any(f["kind"] == "refused" for f in findings):
        print("refused at preview: nothing ran", flush=True)
        bl.delete_queue(east, src)
        bl.delete_queue(west, dst)
        bl.remove_address_settings(east, src)
        return 2
    acks = [x for f in findings if f["kind"] == "needs_ack" for x in ("--ack", f["code"])]
    worker = subprocess.Popen([binary, "worker", "--name", "bench", "--concurrency", "2"], env=penv,
                              stdout=subprocess.DEVNULL,
                              stderr=open(os.path.join(ROOT, "target", "bench-paged-worker.log"), "w"))
    probe = subprocess.Popen(["java", "-Xmx128m", "-cp", classpath, "ProbeProducer", "--url", east["core_url"],
                              "--user", east["user"], "--password", east["password"], "--queue", src,
                              "--every-ms", "50", "--secs", "3600"], stdout=subprocess.PIPE, text=True)
    sends = []
    threading.Thread(target=lambda: [sends.append(tuple(map(int, line.split()))) for line in probe.stdout],
                     daemon=True).start()
    heap = []
    staging_peak = [0]
    staging = f"studio.transfer.{preview['run_id']}"
    done = threading.Event()

    def sample():
        while not done.is_set():
            try:
                used = bl.jolokia_read(east, "java.lang:type=Memory", "HeapMemoryUsage")["used"]
                heap.append((time.time(), used))
            except Exception:
                pass
            d = bl.queue_count(east, "east-1", staging)
            if d is not None:
                staging_peak[0] = max(staging_peak[0], d)
            done.wait(0.5)

    threading.Thread(target=sample, daemon=True).start()
    time.sleep(10.0)  # the probe's and the heap's baseline
    started = time.time()
    run("execute", preview["run_id"], "--plan-hash", preview["plan_hash"], *acks, "--confirm", src, "--override-cap")
    state = bl.wait_run(penv, preview["run_id"])
    ended = time.time()
    done.set()
    probe.terminate()
    probe.wait()
    worker.terminate()
    worker.wait()
    counters = bl.run_counters(penv, preview["run_id"])
    moved = bl.queue_count(west, "west-1", dst)
    before = [us for at, us in sends if at / 1000.0 < started]
    during = [us for at, us in sends if started <= at / 1000.0 <= ended]
    heap_before = [u for at, u in heap if at < started]
    heap_during = [u for at, u in heap if started <= at <= ended]
    mib = lambda b: b / 1048576.0  # noqa: E731
    print(f"run {state} in {ended - started:.1f} s: {moved} on the target (selected {selected}); "
          f"counters delivered {counters.get('delivered')}, batches {counters.get('batches')}", flush=True)
    print(f"staging depth peak {staging_peak[0]} (bound 2 x batch = {2 * args.batch})")
    if heap_before and heap_during:
        print(f"east-1 heap used: before max {mib(max(heap_before)):.0f} MiB; during mean "
              f"{mib(statistics.mean(heap_during)):.0f} MiB, max {mib(max(heap_during)):.0f} MiB "
              f"({len(heap_during)} samples)")
    print(f"probe producer on the source queue, before the run: {percentiles(before)}")
    print(f"probe producer on the source queue, during the run: {percentiles(during)}")
    bl.delete_queue(east, src)
    bl.delete_queue(west, dst)
    bl.remove_address_settings(east, src)
    return 0 if state == "succeeded" and moved == selected else 1


if __name__ == "__main__":
    sys.exit(main())
