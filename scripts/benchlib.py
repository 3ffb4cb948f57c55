"""What the benchmarks share (scripts/bench_move.py, bench_paged.py, bench_sidebyside.py, bench_large.py,
bench_concurrent.py, bench_unstamped.py): the test bed's environment, Jolokia reads and operations, the broker's
`artemis` command (produce, the peer `artemis transfer`), the Java helpers, our own fresh database with both clusters
registered and the rate limits lifted, a worker and its memory, and one run of ours from preview to its end state.

Standard library only, like scripts/testbed: the benchmarks run on a machine where only the test bed is installed.
"""
import base64
import datetime
import hashlib
import json
import os
import platform
import subprocess
import threading
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RELEASE_BINARY = os.path.join(ROOT, "target", "release", "artemis-transfer")

# A run's end states (transfer_run.state); any other state is still going.
END_STATES = ("succeeded", "partial", "failed", "interrupted", "stopped")


def testbed_env():
    out = subprocess.run([os.path.join(ROOT, "scripts", "testbed"), "env"], check=True, capture_output=True, text=True)
    env = {}
    for line in out.stdout.splitlines():
        if line.startswith("export "):
            k, v = line[len("export "):].split("=", 1)
            env[k] = v.strip("'")
    return env


def node(env, name):
    """One test-bed node as the benchmarks address it (its broker name is `name`)."""
    key = name.upper().replace("-", "_")
    n = {k: env[f"TESTBED_NODE_{key}_{k.upper()}"] for k in ("core_url", "jolokia_url", "user", "password")}
    n["broker"] = name
    return n


def _jolokia(n, request, timeout):
    req = urllib.request.Request(n["jolokia_url"] + "/", data=json.dumps(request).encode(), method="POST")
    auth = base64.b64encode(f"{n['user']}:{n['password']}".encode()).decode()
    req.add_header("Authorization", "Basic " + auth)
    req.add_header("Origin", "http://127.0.0.1")
    req.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.load(r)


def jolokia_read(n, mbean, attribute):
    return _jolokia(n, {"type": "read", "mbean": mbean, "attribute": attribute}, 10).get("value")


def jolokia_exec(n, mbean, operation, arguments):
    answer = _jolokia(n, {"type": "exec", "mbean": mbean, "operation": operation, "arguments": arguments}, 30)
    if answer.get("status") != 200:
        raise RuntimeError(f"{operation}: {answer.get('error')}")
    return answer.get("value")


def broker_mbean(n):
    return f'org.apache.activemq.artemis:broker="{n["broker"]}"'


def queue_count(n, broker, queue):
    """The queue's MessageCount, or None when it could not be read (never 0 for unknown)."""
    mbean = (f'org.apache.activemq.artemis:broker="{broker}",component=addresses,address="{queue}",'
             f'subcomponent=queues,routing-type="anycast",queue="{queue}"')
    try:
        v = jolokia_read(n, mbean, "MessageCount")
        return int(v) if v is not None else None
    except Exception:
        return None


def address_paging(n, address):
    """Whether the broker pages the address (its messages beyond memory in page files), None when unread."""
    try:
        return jolokia_read(n, f'{broker_mbean(n)},component=addresses,address="{address}"', "Paging")
    except Exception:
        return None


def create_queue(n, queue):
    """A durable anycast queue `queue` on its own address, through Jolokia (no JVM started for it)."""
    config = {"name": queue, "address": queue, "routing-type": "ANYCAST", "durable": True,
              "auto-create-address": True}
    jolokia_exec(n, broker_mbean(n), "createQueue(java.lang.String,boolean)", [json.dumps(config), False])


def delete_queue(n, queue):
    """Removes the queue, its messages and its address (the brokers have 512 MiB heaps: nothing is left behind)."""
    jolokia_exec(n, broker_mbean(n), "destroyQueue(java.lang.String,boolean,boolean)", [queue, True, True])


def artemis(env, *args, quiet=True, timeout=None):
    cmd = [os.path.join(env["ARTEMIS_HOME"], "bin", "artemis"), *args]
    return subprocess.run(cmd, check=True, capture_output=quiet, text=True, timeout=timeout,
                          env={**os.environ, "JAVA_ARGS": "-Xmx512m"})


def produce(env, n, queue, count, size):
    artemis(env, "producer", "--url", n["core_url"], "--user", n["user"], "--password", n["password"],
            "--destination", f"queue://{queue}", "--message-count", str(count), "--message-size", str(size),
            "--commit-interval", "1000", "--silent")


def peer_transfer_args(src_node, src, dst_node, dst, commit_interval=None, copy=False, receive_timeout_ms=2000):
    """The `artemis` arguments of the peer, `artemis transfer` (a JMS receive/send loop committing every
    `commit_interval` messages; `--copy` sends without acknowledging and rolls the source back at the end). Its loop
    ends at the first receive that waited `receive_timeout_ms` and got nothing — on a loaded machine that can come
    before the queue is empty, so check its census."""
    interval = ["--commit-interval", str(commit_interval)] if commit_interval else []
    return ["transfer", "--source-url", src_node["core_url"], "--source-user", src_node["user"],
            "--source-password", src_node["password"], "--source-queue", src,
            "--target-url", dst_node["core_url"], "--target-user", dst_node["user"],
            "--target-password", dst_node["password"], "--target-queue", dst,
            "--receive-timeout", str(receive_timeout_ms), *interval, *(["--copy"] if copy else []), "--silent"]


def peer_transfer(env, src_node, src, dst_node, dst, commit_interval=None, copy=False, receive_timeout_ms=2000,
                  timeout=None):
    """Runs the peer (peer_transfer_args) to its end. Returns its seconds, start to end, less its trailing receive
    timeout; its JVM start is inside them."""
    t = time.time()
    artemis(env, *peer_transfer_args(src_node, src, dst_node, dst, commit_interval, copy, receive_timeout_ms),
            timeout=timeout)
    return time.time() - t - receive_timeout_ms / 1000.0


def start_artemis(env, *args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, heap="512m"):
    """The broker's `artemis` command started, not waited for (its script execs the JVM: the pid is the JVM's);
    its JVM's -Xmx is `heap`, 512m unless said, as `artemis` runs everywhere in the benchmarks."""
    return subprocess.Popen([os.path.join(env["ARTEMIS_HOME"], "bin", "artemis"), *args], stdout=stdout,
                            stderr=stderr, env={**os.environ, "JAVA_ARGS": f"-Xmx{heap}"})


JAVA_OUT = os.path.join(ROOT, "target", "bench-java")


def build_java(env, *names):
    """Compiles the benchmarks' Java helpers (scripts/java/<name>.java) against the distribution's client jars;
    returns the classpath that runs them beside the test bed's own helpers (Fidelity)."""
    os.makedirs(JAVA_OUT, exist_ok=True)
    subprocess.run(["javac", "-nowarn", "-d", JAVA_OUT, "-cp", env["TESTBED_JAVA_CLASSPATH"],
                    *(os.path.join(ROOT, "scripts", "java", f"{name}.java") for name in names)], check=True)
    return f"{JAVA_OUT}:{env['TESTBED_JAVA_CLASSPATH']}"


def add_paging_limit(n, address, max_size_bytes=1048576, page_size_bytes=262144):
    """Address settings for `address` alone that make it page beyond `max_size_bytes` (PAGE policy); remove them
    with remove_address_settings when done (the `#` settings are never touched)."""
    settings = {"maxSizeBytes": max_size_bytes, "pageSizeBytes": page_size_bytes, "addressFullMessagePolicy": "PAGE"}
    jolokia_exec(n, broker_mbean(n), "addAddressSettings(java.lang.String,java.lang.String)",
                 [address, json.dumps(settings)])


def remove_address_settings(n, address):
    jolokia_exec(n, broker_mbean(n), "removeAddressSettings(java.lang.String)", [address])


def rss_kib(pid, field="VmRSS"):
    """A /proc/<pid>/status memory field in KiB (VmRSS now, VmHWM the peak), None when the process is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def psql_value(url, sql):
    return subprocess.run(["psql", "-qAt", url, "-c", sql], check=True, capture_output=True, text=True).stdout.strip()


def ours(env, east, west, binary, batch, node_calls, database="artemis_transfer_bench"):
    """A fresh database `database` with both clusters registered, rate limits lifted (messages per second always,
    management calls per second to `node_calls`) and the operator `bench` an admin. Returns the environment our
    binary runs with and a function running it."""
    base = env["DATABASE_URL"].rsplit("/", 1)[0]
    admin_url = env["DATABASE_URL"]
    subprocess.run(["psql", "-q", admin_url, "-c", f"DROP DATABASE IF EXISTS {database} WITH (FORCE)",
                    "-c", f"CREATE DATABASE {database}"], check=True, capture_output=True)
    penv = {**os.environ, "DATABASE_URL": f"{base}/{database}",
            "RUST_LOG": os.environ.get("BENCH_WORKER_LOG", "warn"),
            "ARTEMIS_TRANSFER_CREDENTIALS__TESTBED__USER": east["user"],
            "ARTEMIS_TRANSFER_CREDENTIALS__TESTBED__PASSWORD": east["password"],
            "ARTEMIS_TRANSFER_OPERATOR": "bench"}

    def run(*a, capture=True):
        return subprocess.run([binary, *a], check=True, capture_output=capture, text=True, env=penv)

    run("migrate")
    run("cluster", "add", "east", "--core-url", east["core_url"], "--credentials", "testbed")
    # A node may say how the product registers it (scripts/bench_move.py's TLS node carries its client certificate).
    run("cluster", "add", west.get("cluster", "west"), "--core-url", west.get("registered_core_url", west["core_url"]),
        "--credentials", "testbed")
    subprocess.run(["psql", "-q", penv["DATABASE_URL"], "-c",
                    "UPDATE setting SET value = '1000000' WHERE key = 'messages_per_second'",
                    "-c", f"UPDATE setting SET value = '{node_calls}' WHERE key = 'node_calls_per_second'",
                    "-c", "INSERT INTO transfer_grant (principal, cluster, permission, granted_by) "
                          "VALUES ('bench', '*', 'admin', 'bench') ON CONFLICT DO NOTHING"],
                   check=True, capture_output=True)
    set_batch(penv, batch)
    return penv, run


def set_batch(penv, batch):
    """Our batch size; the relay reads it before every batch, so it holds from a run's first batch."""
    subprocess.run(["psql", "-q", penv["DATABASE_URL"], "-c",
                    f"UPDATE setting SET value = '{int(batch)}' WHERE key = 'batch_size'"],
                   check=True, capture_output=True)


def drop_database(env, database):
    subprocess.run(["psql", "-q", env["DATABASE_URL"], "-c", f"DROP DATABASE IF EXISTS {database} WITH (FORCE)"],
                   check=True, capture_output=True)


def start_worker(binary, penv, log_path, name="bench", concurrency=2):
    """A worker running up to `concurrency` jobs at once (2 unless said: as the benchmarks have always run it);
    its log goes to `log_path`."""
    return subprocess.Popen([binary, "worker", "--name", name, "--concurrency", str(concurrency)], env=penv,
                            stdout=subprocess.DEVNULL, stderr=open(log_path, "w"))


def stop_worker(worker):
    worker.terminate()
    worker.wait()


def preview(run, src, dst, copy=False):
    """Our preview of the whole queue `src` on east-1 to `dst` on west-1 (registered as clusters east and west)."""
    return json.loads(run("preview", "--from", f"east/east-1/{src}", "--to", f"west/west-1/{dst}", "--all",
                          *(["--copy"] if copy else []), "--json").stdout)


def execute(run, previewed, src):
    """Executes a preview, acknowledging what it asks to be acknowledged."""
    acks = [x for f in previewed["preview"]["findings"] if f["kind"] == "needs_ack" for x in ("--ack", f["code"])]
    run("execute", previewed["run_id"], "--plan-hash", previewed["plan_hash"], *acks, "--confirm", src,
        "--override-cap")


class PsqlSession:
    """One `psql` process that answers query after query over its pipes. Starting `psql` costs ~34 ms of CPU on the
    test bed (measured: 40 starts), so polling a run's state with a new one every 0.2 s took ~8 % of the two cores
    away from our side while it ran — a tax the peer, which nobody polls, never paid. A query on this session costs
    ~0.2 ms."""

    def __init__(self, url):
        self.proc = subprocess.Popen(["psql", "-qAtX", "-v", "ON_ERROR_STOP=0", url], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, bufsize=1)

    def value(self, sql):
        """The first column of the single-row answer to `sql` ('' for none)."""
        self.proc.stdin.write(f"{sql};\n\\echo __end__\n")
        self.proc.stdin.flush()
        lines = []
        while (line := self.proc.stdout.readline()) and line.rstrip("\n") != "__end__":
            lines.append(line.rstrip("\n"))
        if not line:
            raise RuntimeError(f"psql ended while answering {sql!r}")
        return lines[0] if lines else ""

    def close(self):
        self.proc.stdin.close()
        self.proc.wait()


def wait_run(penv, run_id, timeout=None):
    """Polls the run's state on one psql session until it ends; returns the end state, or None when `timeout`
    seconds passed first (the run's state then unknown to the benchmark, not a success). The benchmarks take a run's
    end from its `ended_at` (`run_ended_at`), so how often this looks does not change what they measure."""
    deadline = None if timeout is None else time.time() + timeout
    session = PsqlSession(penv["DATABASE_URL"])
    try:
        while True:
            state = session.value(f"SELECT state FROM transfer_run WHERE id = '{run_id}'")
            if state in END_STATES:
                return state
            if deadline is not None and time.time() > deadline:
                return None
            time.sleep(0.2)
    finally:
        session.close()


def run_ended_at(penv, run_id):
    """When the run reached its end state (the database's clock, the same machine's), as Unix seconds; None when
    it has not ended."""
    v = psql_value(penv["DATABASE_URL"], f"SELECT extract(epoch FROM ended_at) FROM transfer_run WHERE id = '{run_id}'")
    return float(v) if v else None


def run_counters(penv, run_id):
    return json.loads(psql_value(penv["DATABASE_URL"], f"SELECT counters FROM transfer_run WHERE id = '{run_id}'"))


class PeakSampler:
    """Calls `read` every `every` seconds in a thread and keeps the highest value: `peak` (None when no read gave
    one), `samples` (reads made) and `misses` (reads that gave None or failed: the thing did not answer);
    `silent_secs()` is how long it has gone without an answer (a read that times out takes longer than `every`)."""

    def __init__(self, read, every=0.2):
        self.read, self.every = read, every
        self.peak, self.samples, self.misses = None, 0, 0
        self._answered = time.time()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self):
        while not self._done.is_set():
            try:
                v = self.read()
            except Exception:
                v = None
            if v is None:
                self.misses += 1
            else:
                self._answered = time.time()
                self.peak = v if self.peak is None else max(self.peak, v)
            self.samples += 1
            self._done.wait(self.every)

    def start(self):
        self._thread.start()
        return self

    def stop(self):
        self._done.set()
        self._thread.join()

    def silent_secs(self):
        return time.time() - self._answered


class RssSampler(PeakSampler):
    """A process's resident memory (/proc/<pid>/status VmRSS, KiB) sampled every `every` seconds; `peak` is the
    highest sample. `hwm_kib()` is the kernel's own peak (VmHWM), readable only while the process lives: read it
    before stopping the process."""

    def __init__(self, pid, every=0.2):
        super().__init__(lambda: rss_kib(pid), every)
        self.pid = pid

    def hwm_kib(self):
        return rss_kib(self.pid, "VmHWM")


def heap_used(n):
    """The broker's JVM heap in use, in bytes (Jolokia java.lang:type=Memory)."""
    return _jolokia(n, {"type": "read", "mbean": "java.lang:type=Memory", "attribute": "HeapMemoryUsage"},
                    5)["value"]["used"]


def loadavg_words():
    return "{:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


def machine_words():
    model = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            model = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), model)
    except OSError:
        pass
    mem = None
    try:
        with open("/proc/meminfo") as f:
            mem = next((int(line.split()[1]) for line in f if line.startswith("MemTotal:")), None)
    except OSError:
        pass
    mem_words = f"{mem / 1048576:.0f} GiB RAM" if mem else "RAM unknown"
    return f"{os.cpu_count()} cores ({model}), {mem_words}, {platform.system()} {platform.release()}"


def commit_words():
    out = subprocess.run(["git", "-C", ROOT, "describe", "--always", "--dirty"], capture_output=True, text=True)
    return out.stdout.strip() or "unknown"


def binary_words(path):
    """Which build is under test: its path, when it was built and the start of its SHA-256 (two builds differ)."""
    with open(path, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()[:12]
    built = datetime.datetime.fromtimestamp(os.path.getmtime(path), datetime.timezone.utc)
    return f"{path} (built {built:%Y-%m-%d %H:%M} UTC, sha256 {digest}…)"


def header_words(name):
    """A benchmark's first line: its name, the time, the commit, the machine and its load."""
    return (f"{name}: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M:%S} UTC; commit {commit_words()}; "
            f"machine {machine_words()}; load average {loadavg_words()}")
