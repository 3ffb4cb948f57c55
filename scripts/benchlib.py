"""What the benchmarks share (scripts/bench_move.py, bench_paged.py, bench_sidebyside.py): the test bed's
environment, Jolokia reads and operations, the broker's `artemis` command (produce, the peer `artemis transfer`),
our own fresh database with both clusters registered and the rate limits lifted, a worker, and one run of ours
from preview to its end state.

Standard library only, like scripts/testbed: the benchmarks run on a machine where only the test bed is installed.
"""
import base64
import json
import os
import subprocess
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


def peer_transfer(env, src_node, src, dst_node, dst, commit_interval=None, copy=False, receive_timeout_ms=2000,
                  timeout=None):
    """The peer, `artemis transfer` (a JMS receive/send loop committing every `commit_interval` messages; `--copy`
    sends without acknowledging and rolls the source back at the end). Its loop ends at the first receive that
    waited `receive_timeout_ms` and got nothing — on a loaded machine that can come before the queue is empty, so
    check its census. Returns its seconds, start to end, less that trailing wait; its JVM start is inside them."""
    interval = ["--commit-interval", str(commit_interval)] if commit_interval else []
    t = time.time()
    artemis(env, "transfer", "--source-url", src_node["core_url"], "--source-user", src_node["user"],
            "--source-password", src_node["password"], "--source-queue", src,
            "--target-url", dst_node["core_url"], "--target-user", dst_node["user"],
            "--target-password", dst_node["password"], "--target-queue", dst,
            "--receive-timeout", str(receive_timeout_ms), *interval, *(["--copy"] if copy else []), "--silent",
            timeout=timeout)
    return time.time() - t - receive_timeout_ms / 1000.0


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


def start_worker(binary, penv, log_path, name="bench"):
    """A worker with two runs at a time, as the benchmarks have always run it; its log goes to `log_path`."""
    return subprocess.Popen([binary, "worker", "--name", name, "--concurrency", "2"], env=penv,
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


def wait_run(penv, run_id, timeout=None):
    """Polls the run's state until it ends; returns the end state, or None when `timeout` seconds passed first
    (the run's state then unknown to the benchmark, not a success)."""
    deadline = None if timeout is None else time.time() + timeout
    while True:
        state = psql_value(penv["DATABASE_URL"], f"SELECT state FROM transfer_run WHERE id = '{run_id}'")
        if state in END_STATES:
            return state
        if deadline is not None and time.time() > deadline:
            return None
        time.sleep(0.2)


def run_ended_at(penv, run_id):
    """When the run reached its end state (the database's clock, the same machine's), as Unix seconds; None when
    it has not ended."""
    v = psql_value(penv["DATABASE_URL"], f"SELECT extract(epoch FROM ended_at) FROM transfer_run WHERE id = '{run_id}'")
    return float(v) if v else None


def run_counters(penv, run_id):
    return json.loads(psql_value(penv["DATABASE_URL"], f"SELECT counters FROM transfer_run WHERE id = '{run_id}'"))
