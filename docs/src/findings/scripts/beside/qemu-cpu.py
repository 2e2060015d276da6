#!/usr/bin/env python3
"""CPU time of every vmrepro QEMU on this host, by suite, while a test run goes on.

Samples /proc every second: for each qemu-system-x86_64 process, its utime+stime
(/proc/PID/stat fields 14 and 15, clock ticks) and the suite named in its console
path (`suite-results/<suite>/`). When the watched process (--until PID) ends, prints
per suite: QEMU CPU seconds, the wall seconds from its first to its last sample, and
their ratio (cores busy on average). Used for BENCHMARKS.md, "Suites beside each other".

Usage: qemu-cpu.py --until PID [--out FILE]
"""
import argparse, json, os, re, time

ap = argparse.ArgumentParser()
ap.add_argument("--until", type=int, required=True)
ap.add_argument("--out")
a = ap.parse_args()
tick = os.sysconf("SC_CLK_TCK")
seen = {}  # pid -> dict(suite, vm, cpu, first, last)
while os.path.exists(f"/proc/{a.until}"):
    now = time.time()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
            if not cmd.startswith("qemu-system-x86_64"):
                continue
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        cpu = (int(fields[11]) + int(fields[12])) / tick
        m = re.search(r"suite-results/([^/]+)/", cmd)
        vm = re.search(r"guest=([^,\s]+)", cmd)
        e = seen.setdefault(pid, {"suite": m.group(1) if m else "?", "vm": vm.group(1) if vm else "?", "first": now})
        e["cpu"], e["last"] = cpu, now
    time.sleep(1)
suites = {}
for e in seen.values():
    s = suites.setdefault(e["suite"], {"cpu_s": 0.0, "first": e["first"], "last": e["last"], "vms": 0})
    s["cpu_s"] += e["cpu"]
    s["first"], s["last"] = min(s["first"], e["first"]), max(s["last"], e["last"])
    s["vms"] += 1
out = []
for name, s in sorted(suites.items(), key=lambda kv: kv[1]["first"]):
    wall = s["last"] - s["first"]
    out.append({"suite": name, "qemus": s["vms"], "qemu_cpu_s": round(s["cpu_s"], 1),
                "start": time.strftime("%H:%M:%S", time.gmtime(s["first"])),
                "end": time.strftime("%H:%M:%S", time.gmtime(s["last"])),
                "wall_s": round(wall, 1), "cores": round(s["cpu_s"] / wall, 2) if wall else None})
text = "\n".join(json.dumps(o) for o in out)
print(text)
if a.out:
    open(a.out, "w").write(text + "\n")
