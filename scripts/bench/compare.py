"""Compare protospread's cells.parquet with DuckDB's per-cell table.

python3 compare.py PROTOSPREAD_CELLS DUCKDB_CELLS. Exit status 1 on any disagreement: a kept cell
on one side only; protocol SD, sampling SD or ratio more than 1e-9 apart (relative); or a
different "protocol SD > sampling SD" where the two variances are not exactly equal (DuckDB
compares floats, so it can err on exact ties; protospread compares exact fractions).
"""
import sys

import duckdb

ours, theirs = sys.argv[1:3]
con = duckdb.connect()


def close(a, b):
    """Within 1e-9 relative. An SD that is exactly 0 on our side may be float noise in DuckDB
    (stddev_samp of equal doubles); nonzero SDs of integer scores are far above 1e-12."""
    return (f"(abs({a} - {b}) <= 1e-9 * greatest(abs({a}), abs({b})) "
            f"OR ({a} = 0 AND abs({b}) < 1e-12))")


q = f"""
WITH o AS (SELECT model, test, dimension, protocol_sd, sampling_sd, ratio, protocol_gt_sampling
           FROM read_parquet('{ours}') WHERE kept AND sampling_sd IS NOT NULL),
     d AS (SELECT * FROM read_parquet('{theirs}')),
     j AS (SELECT o.model IS NULL AS only_duckdb, d.model IS NULL AS only_protospread,
                  o.protocol_sd AS op, d.protocol_sd AS dp, o.sampling_sd AS os, d.sampling_sd AS ds,
                  o.ratio AS orat, d.ratio AS drat, o.protocol_gt_sampling AS oe,
                  d.protocol_gt_sampling AS de,
                  -- equal sample variances: p_dev / (n_p (n_p - 1)) = s_dev / (n_s (n_s - 1))
                  d.p_dev * d.sampling_n * (d.sampling_n - 1)
                    = d.s_dev * d.protocol_n * (d.protocol_n - 1) AS tie
           FROM o FULL OUTER JOIN d USING (model, test, dimension))
SELECT count(*) AS cells,
       count(*) FILTER (WHERE only_duckdb) AS only_duckdb,
       count(*) FILTER (WHERE only_protospread) AS only_protospread,
       count(*) FILTER (WHERE NOT only_duckdb AND NOT only_protospread AND NOT (
           {close('op', 'dp')} AND {close('os', 'ds')})) AS sd_differ,
       count(*) FILTER (WHERE NOT only_duckdb AND NOT only_protospread AND NOT (
           (orat IS NULL AND (drat IS NULL OR isnan(drat)))
           OR (isinf(orat) AND (drat IS NULL OR isinf(drat) OR drat > 1e12))
           OR {close('orat', 'drat')})) AS ratio_differ,
       count(*) FILTER (WHERE tie) AS exact_ties,
       count(*) FILTER (WHERE tie AND oe) AS ties_counted_exceeding_by_protospread,
       count(*) FILTER (WHERE tie AND de) AS ties_counted_exceeding_by_duckdb,
       count(*) FILTER (WHERE NOT tie AND oe IS DISTINCT FROM de) AS decision_differ
FROM j
"""
row = con.execute(q).fetchone()
names = [c[0] for c in con.description]
for n, v in zip(names, row):
    print(f"  {n}: {v}")
r = dict(zip(names, row))
bad = r["only_duckdb"] + r["only_protospread"] + r["sd_differ"] + r["ratio_differ"] \
    + r["decision_differ"] + r["ties_counted_exceeding_by_protospread"]
if r["cells"] == 0 or bad:
    print("per-cell tables DISAGREE")
    sys.exit(1)
print("per-cell tables agree")
