"""Per-setting table and coefficients of variation of docs/src/findings/scripts/noise/aa-noise.sh's runs."""
import json, glob, statistics as st, sys
OUT = sys.argv[1] if len(sys.argv) > 1 else 'results/noise'
def cv(xs): return st.stdev(xs)/st.mean(xs) if len(xs) > 1 else float('nan')
summ = {}
for l in open(f'{OUT}/summary.txt'):
    p = l.split()
    if len(p) >= 4: summ.setdefault(p[1], []).append(float(p[3].split('=')[1]))
for cond in summ:
    runs = sorted(glob.glob(f'{OUT}/{cond}/nfs-aa-same-kernel/*/results.json'))
    rows = []
    for i, f in enumerate(runs):
        r = json.load(open(f))
        m = [x for x in r['measurements'] if x['name'] == 'nfs-read'][0]
        med = {}; within = {}; verdict = None
        for v in m['vms']:
            e = [it['elapsed_s'] for it in v['iterations'] if it.get('counted', True)]
            med[v['vm']] = st.median(e); within[v['vm']] = cv(e)
            if v['vm'] == 'client-b': verdict = (v.get('verdict') or '').split(':')[0]
        rows.append((med['client-a'], med['client-b'], med['client-b']/med['client-a'], within['client-a'], within['client-b'], verdict))
    print(f'## {cond}: {len(rows)} runs; wall s: {summ.get(cond)}')
    for i, (a, b, q, wa, wb, v) in enumerate(rows, 1):
        print(f'| {i} | {a:.2f} ({wa:.3f}) | {b:.2f} ({wb:.3f}) | {q:.2f} | {v} |')
    if len(rows) > 1:
        print(f'CV over runs: a {cv([r[0] for r in rows]):.3f}  b {cv([r[1] for r in rows]):.3f}  b/a {cv([r[2] for r in rows]):.3f}; mean within-run CV {st.mean([r[3] for r in rows]+[r[4] for r in rows]):.3f}; median read {st.median([r[0] for r in rows]+[r[1] for r in rows]):.2f}')
