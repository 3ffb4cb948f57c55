#!/usr/bin/env python3
"""Where a broker's CPU samples fell in a Java Flight Recorder profile (issue 29): each `jdk.ExecutionSample` is
put in the first bucket whose frame appears anywhere in its stack (the rules below, most specific first), and the
methods seen most often — anywhere in the stack and on top — are listed. JFR samples Java threads only: the
garbage collector's and the JIT compiler's CPU is not in it.

Run as `scripts/profile_buckets.py FILE.jfr [--top N]`, or through `scripts/bench cpu --profile DIR`.
"""
import argparse
import collections
import re
import subprocess

# (bucket, a frame's text that puts a sample in it): the first rule whose text is in the stack wins.
RULES = [
    ("management: moveMessages", "QueueControlImpl.moveMessages"),
    ("management: countMessages", "QueueControlImpl.countMessages"),
    ("management: list scheduled", "QueueControlImpl.listScheduledMessages"),
    ("management: address settings", "getAddressSettingsAsJSON"),
    ("management: other Jolokia (reads, JSON, auth)", "org.jolokia"),
    ("management: console login / HTTP", "org.eclipse.jetty"),
    ("session: create", "handleCreateSession"),
    ("session: create consumer", "SessionCreateConsumer"),
    ("session: create consumer", "ServerSessionImpl.createConsumer"),
    ("session: close consumer", "ServerConsumerImpl.close"),
    ("session: close", "ServerSessionImpl.close"),
    ("session: commit", "ServerSessionImpl.commit"),
    ("session: rollback", "ServerSessionImpl.rollback"),
    ("session: acknowledge", "ServerSessionImpl.individualAcknowledge"),
    ("session: acknowledge", "ServerSessionImpl.acknowledge"),
    ("session: send", "ServerSessionImpl.send"),
    ("session: send", "ServerSessionImpl.doSend"),
    ("delivery to consumers", "ServerConsumerImpl"),
    ("delivery to consumers", "QueueImpl.deliver"),
    ("paging", "org.apache.activemq.artemis.core.paging"),
    ("journal", "org.apache.activemq.artemis.core.journal"),
    ("journal", "org.apache.activemq.artemis.core.io"),
    ("notifications", "ManagementServiceImpl.sendNotification"),
    ("remoting: decode / encode", "org.apache.activemq.artemis.core.protocol.core"),
    ("remoting: netty", "io.netty"),
    ("scheduled tasks", "ScheduledThreadPoolExecutor"),
]

FRAME = re.compile(r"^\s+(\S+)\(")


def samples(path):
    """Each sample's thread and frames (top first)."""
    out = subprocess.run(["jfr", "print", "--events", "jdk.ExecutionSample", "--stack-depth", "96", path],
                         capture_output=True, text=True, check=True).stdout
    thread, frames, in_stack = None, [], False
    for line in out.splitlines():
        if line.startswith("jdk.ExecutionSample"):
            thread, frames, in_stack = None, [], False
        elif "sampledThread" in line:
            thread = line.split("=", 1)[1].strip()
        elif "stackTrace = [" in line:
            in_stack = True
        elif in_stack and line.strip() in ("]", "...") :
            if line.strip() == "]":
                in_stack = False
                yield thread, frames
        elif in_stack:
            m = FRAME.match(line)
            if m:
                frames.append(m.group(1))


def bucket(frames):
    joined = "\n".join(frames)
    for name, text in RULES:
        if text in joined:
            return name
    return "other: " + (frames[0] if frames else "?")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("file")
    ap.add_argument("--top", type=int, default=20)
    args = ap.parse_args()
    buckets, inclusive, on_top = collections.Counter(), collections.Counter(), collections.Counter()
    n = 0
    for _thread, frames in samples(args.file):
        n += 1
        buckets[bucket(frames)] += 1
        on_top[frames[0] if frames else "?"] += 1
        for f in set(frames):
            if f.startswith(("org.apache.activemq", "org.jolokia")):
                inclusive[f] += 1
    print(f"{n} samples")
    folded = collections.Counter()
    for name, c in buckets.items():
        folded[name if not name.startswith("other: ") else "other"] += c
    for name, c in folded.most_common():
        print(f"  {100 * c / max(n, 1):5.1f} %  {name}")
    print("most seen anywhere in the stack (the broker's and Jolokia's methods):")
    for f, c in inclusive.most_common(args.top):
        print(f"  {100 * c / max(n, 1):5.1f} %  {f}")
    print("most seen on top:")
    for f, c in on_top.most_common(args.top):
        print(f"  {100 * c / max(n, 1):5.1f} %  {f}")
    print("'other', by top frame:")
    for name, c in buckets.most_common():
        if name.startswith("other: ") and c * 200 >= n:
            print(f"  {100 * c / max(n, 1):5.1f} %  {name[7:]}")


if __name__ == "__main__":
    main()
