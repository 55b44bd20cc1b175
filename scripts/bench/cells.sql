-- The per-cell table of protospread's aggregate stage, computed by DuckDB from a stored-answer
-- Parquet file (format v1), the scoring key and the human norms, as a user would write it
-- without protospread. Placeholders @ANSWERS@, @KEY@, @NORMS@ and @OUT@ are replaced by
-- scripts/bench/run_duckdb.py. Conventions: docs/stored-answers.md (the strict reply rule),
-- docs/statistics.md (cells, which are dropped, SDs in human SDs).

-- The key with one id per scale (test, dimension), and the scales with their human norms.
CREATE TEMP TABLE key AS
SELECT test, CAST(item AS INTEGER) AS item, dimension, CAST(reverse AS INTEGER) = 1 AS rev,
       CAST(weight AS DOUBLE) AS weight, CAST(scale_min AS INTEGER) AS lo,
       CAST(scale_max AS INTEGER) AS hi,
       CAST(dense_rank() OVER (ORDER BY test, dimension) AS INTEGER) AS dim
FROM read_csv('@KEY@', header = true, all_varchar = true);

CREATE TEMP TABLE dims AS
SELECT k.dim, k.test, k.dimension, k.n, k.max_points, n.mean, n.sd
FROM (SELECT dim, test, dimension, count(*) AS n, sum(weight * (hi - lo)) AS max_points
      FROM key GROUP BY ALL) k
JOIN read_parquet('@NORMS@') n USING (test, dimension);

-- One pass over the replies. Strict rule: a reply (or the rest of an answer line) trimmed of
-- Unicode White_Space is one or more ASCII digits, optionally one '.' or ')'; ok for 1..5.
-- Whole-test replies: every answer line ("<position><spaces/tabs><one of :.)=-><rest>") with
-- its position and, when the rest is ok, its option; lines are split at \n only.
CREATE TEMP TABLE req AS
SELECT file_row_number AS rid, model, condition, sample, test, item, item_order,
       option_order = 'reversed' AS reversed,
       CASE WHEN mode = 'single' AND coalesce(error, '') = '' THEN TRY_CAST(regexp_extract(reply,
         '^[\t\n\x{0B}\f\r \x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000}]*0*([1-5])[.)]?[\t\n\x{0B}\f\r \x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000}]*$',
         1) AS INTEGER) END AS opt,
       CASE WHEN mode = 'whole' AND coalesce(error, '') = '' THEN regexp_extract_all(reply,
         '(?m)^[\t\x{0B}\f\r \x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000}]*([0-9]+)[ \t]*[:.)=-](?:[\t\x{0B}\f\r \x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000}]*0*([1-5])[.)]?[\t\x{0B}\f\r \x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000}]*$)?',
         ['pos', 'opt']) END AS lines
FROM read_parquet('@ANSWERS@', file_row_number = true)
WHERE condition IN ('S0', 'S0r', 'SR', 'SP', 'B0', 'B0r', 'BS1', 'BS2', 'BS3', 'BS4', 'ST1');

-- A reading's points: the option shown mapped back to the human value 0..4 (docs/stored-answers.md
-- 2.4), then the key's weight and direction.
CREATE TEMP MACRO pts(opt, reversed, rev, weight, lo, hi) AS
  weight * CASE WHEN rev THEN hi - CASE WHEN reversed THEN 5 - opt ELSE opt - 1 END
                ELSE CASE WHEN reversed THEN 5 - opt ELSE opt - 1 END - lo END;

-- Single-item administrations by scale, over all their requests: a missing or unreadable item
-- leaves the scale incomplete (n_ok below the key's item count).
CREATE TEMP TABLE single_scores AS
SELECT r.model, r.condition, r.sample, k.dim, count(r.opt) AS n_ok,
       sum(pts(r.opt, r.reversed, k.rev, k.weight, k.lo, k.hi)) AS points
FROM req r JOIN key k ON k.test = r.test AND k.item = r.item
GROUP BY ALL;

-- Whole-test replies: a shown position is answered when exactly one answer line names it; its
-- option counts when that line's rest is ok. Position p shows item_order's p-th item.
CREATE TEMP TABLE whole_ok AS
SELECT rid, pos, any_value(opt) AS opt
FROM (SELECT rid, TRY_CAST(l.pos AS INTEGER) AS pos, CAST(l.opt AS INTEGER) AS opt
      FROM (SELECT rid, unnest(lines) AS l FROM req WHERE lines IS NOT NULL))
GROUP BY rid, pos
HAVING count(*) = 1 AND any_value(opt) IS NOT NULL;

CREATE TEMP TABLE whole_scores AS
SELECT s.rid, k.dim, count(*) AS n_ok,
       sum(pts(w.opt, s.reversed, k.rev, k.weight, k.lo, k.hi)) AS points
FROM (SELECT rid, test, reversed, CAST(unnest(o) AS INTEGER) AS item,
             unnest(range(1, len(o) + 1)) AS pos
      FROM (SELECT rid, test, reversed, string_split(item_order, ';') AS o
            FROM req WHERE item IS NULL)) s
JOIN whole_ok w ON w.rid = s.rid AND w.pos = s.pos
JOIN key k ON k.test = s.test AND k.item = s.item
GROUP BY ALL;

-- Every scale of every administration, with its score (a rounded percentage of the maximum)
-- and z in human SDs; complete when every item of the scale is ok.
CREATE TEMP TABLE scores AS
SELECT a.model, a.condition, a.sample, a.dim, a.n_ok = d.n AS complete,
       CAST(round(a.points / d.max_points * 100) AS BIGINT) AS score,
       (round(a.points / d.max_points * 100) - d.mean) / d.sd AS z
FROM (SELECT model, condition, sample, dim, n_ok, points FROM single_scores
      UNION ALL
      SELECT r.model, r.condition, r.sample, d.dim, coalesce(w.n_ok, 0), coalesce(w.points, 0)
      FROM req r JOIN dims d ON d.test = r.test
      LEFT JOIN whole_scores w ON w.rid = r.rid AND w.dim = d.dim
      WHERE r.item IS NULL) a
JOIN dims d USING (dim);

-- Per cell (model x scale): kept when every protocol condition has an administration, every
-- administration is complete, and both sets have at least two (docs/statistics.md).
COPY (
  SELECT s.model, d.test, d.dimension,
         count(*) FILTER (WHERE p) AS protocol_n,
         count(*) FILTER (WHERE NOT p) AS sampling_n,
         stddev_samp(z) FILTER (WHERE p) AS protocol_sd,
         stddev_samp(z) FILTER (WHERE NOT p) AS sampling_sd,
         stddev_samp(z) FILTER (WHERE p) / stddev_samp(z) FILTER (WHERE NOT p) AS ratio,
         stddev_samp(z) FILTER (WHERE p) > stddev_samp(z) FILTER (WHERE NOT p) AS protocol_gt_sampling,
         -- n^2 x the population variance, exact: only to tell exact ties in the comparison
         CAST(count(*) FILTER (WHERE p) AS HUGEINT) * sum(score * score) FILTER (WHERE p)
           - CAST(sum(score) FILTER (WHERE p) AS HUGEINT) * sum(score) FILTER (WHERE p) AS p_dev,
         CAST(count(*) FILTER (WHERE NOT p) AS HUGEINT) * sum(score * score) FILTER (WHERE NOT p)
           - CAST(sum(score) FILTER (WHERE NOT p) AS HUGEINT) * sum(score) FILTER (WHERE NOT p) AS s_dev
  FROM (SELECT *, condition <> 'ST1' AS p FROM scores) s JOIN dims d USING (dim)
  GROUP BY s.model, d.test, d.dimension
  HAVING count(DISTINCT condition) FILTER (WHERE p) = 10 AND bool_and(complete)
     AND count(*) FILTER (WHERE p) >= 2 AND count(*) FILTER (WHERE NOT p) >= 2
) TO '@OUT@' (FORMAT parquet);
