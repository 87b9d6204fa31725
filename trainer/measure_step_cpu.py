#!/usr/bin/python3
"""Step time and CPU of chorus-train with 4 ranks on one host, two builds in alternating rounds.

usage: trainer/measure_step_cpu.py BUILD_A BUILD_B [ROUNDS [STEPS [RANKS]]]

Each round runs `chorus-run -n RANKS -- chorus-train --model mlp --max-steps STEPS` from BUILD_A,
then from BUILD_B. Per run: the median step time of the metrics file after 20 warm-up steps, and
the CPU time (user + system) of every rank from the trainer's first line to its exit, per step
(the final evaluation included). Prints each run with the load average, then the medians and the
per-round ratios B / A.
"""
import csv
import os
import statistics as st
import subprocess
import sys
import tempfile

TICKS = os.sysconf('SC_CLK_TCK')


def cpu_of_children(root):
    """CPU seconds of `root` and its direct children (the ranks), all threads."""
    total = 0
    for pid in filter(str.isdigit, os.listdir('/proc')):
        try:
            stat = open(f'/proc/{pid}/stat').read()
        except OSError:
            continue
        fields = stat[stat.rindex(')') + 2:].split()
        if int(pid) == root or int(fields[1]) == root:
            total += int(fields[11]) + int(fields[12])
    return total / TICKS


def median_step_ms(path):
    t = [float(r['train_s']) for r in csv.DictReader(open(path))]
    return st.median([b - a for a, b in zip(t, t[1:])][20:]) * 1e3


def run(build, steps, ranks, metrics):
    cmd = [f'{build}/tools/chorus-run/chorus-run', '-n', str(ranks), '--',
           f'{build}/trainer/chorus-train', '--model', 'mlp', '--max-steps', str(steps),
           '--no-progress', '--check-every', '0', '--metrics', metrics]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    start = None
    for line in p.stdout:
        if start is None and line.startswith('chorus-train:'):
            start = cpu_of_children(p.pid)
    _, status, usage = os.wait4(p.pid, 0)
    if status != 0 or start is None:
        sys.exit(f'{" ".join(cmd)} failed (status {status})')
    return (usage.ru_utime + usage.ru_stime - start) / steps * 1e3, median_step_ms(metrics)


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    builds = sys.argv[1:3]
    rounds, steps, ranks = (int(a) for a in (sys.argv[3:] + ['5', '150', '4'][len(sys.argv) - 3:]))
    results = {b: [] for b in builds}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(rounds):
            for b in builds:
                load = open('/proc/loadavg').read().split()[0]
                cpu, ms = run(b, steps, ranks, os.path.join(tmp, 'm.csv'))
                results[b].append((cpu, ms))
                print(f'round {i + 1} {b} (load {load}): step {ms:.2f} ms, cpu {cpu:.2f} ms/step',
                      flush=True)
    for b in builds:
        print(f'{b}: median step {st.median(m for _, m in results[b]):.2f} ms, '
              f'median cpu {st.median(c for c, _ in results[b]):.2f} ms/step')
    a, b = (results[x] for x in builds)
    step = [y[1] / x[1] for x, y in zip(a, b)]
    cpu = [y[0] / x[0] for x, y in zip(a, b)]
    print('per round B / A: step ' + ' '.join(f'{r:.2f}' for r in step) +
          f' (median {st.median(step):.3f}); cpu ' + ' '.join(f'{r:.2f}' for r in cpu) +
          f' (median {st.median(cpu):.3f})')


if __name__ == '__main__':
    main()
