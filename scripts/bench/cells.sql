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

-- A reading's points: the option shown mapped back to the human value 0..4 (docs/stored-answers.md
-- 2.4), then the key's weight and direction.
CREATE TEMP MACRO pts(opt, reversed, rev, weight, lo, hi) AS
  weight * CASE WHEN rev THEN hi - CASE WHEN reversed THEN 5 - opt ELSE opt - 1 END
                ELSE CASE WHEN reversed THEN 5 - opt ELSE opt - 1 END - lo END;

-- The strict rule (docs/stored-answers.md 2.1): a reply trimmed of Unicode White_Space is one or
-- more ASCII digits, optionally one '.' or ')'; ok for 1..5. A one-character reply needs no
-- regular expression.
CREATE TEMP MACRO strict_option(reply) AS
  CASE WHEN length(reply) = 1 THEN CASE WHEN reply BETWEEN '1' AND '5' THEN CAST(reply AS INTEGER) END
       ELSE TRY_CAST(regexp_extract(reply, '^[\t\n\x{0B}\f\r \x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000}]*0*([1-5])[.)]?[\t\n\x{0B}\f\r \x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000}]*$', 1) AS INTEGER) END;

-- Each reply is read once: the single-item rows here, the whole-test rows below. Single-item
-- administrations by scale, over all their requests: a missing or unreadable item leaves the
-- scale incomplete (fewer ok items than the key has).
CREATE TEMP TABLE single_scores AS
SELECT r.model, r.condition, r.sample, k.dim, count(r.opt) = d.n AS complete,
       sum(pts(r.opt, r.reversed, k.rev, k.weight, k.lo, k.hi)) AS points
FROM (SELECT model, condition, sample, test, item, option_order = 'reversed' AS reversed,
             CASE WHEN coalesce(error, '') = '' THEN strict_option(reply) END AS opt
      FROM read_parquet('@ANSWERS@')
      WHERE mode = 'single' AND condition IN ('S0', 'S0r', 'SR', 'SP', 'B0', 'B0r', 'BS1', 'BS2', 'BS3', 'BS4', 'ST1')) r
JOIN key k ON k.test = r.test AND k.item = r.item
JOIN dims d ON d.dim = k.dim
GROUP BY r.model, r.condition, r.sample, k.dim, d.n;

-- Whole-test requests (one per administration), numbered by their row in the file.
CREATE TEMP TABLE whole AS
SELECT file_row_number AS rid, model, condition, sample, test, item_order,
       option_order = 'reversed' AS reversed, CASE WHEN coalesce(error, '') = '' THEN reply END AS reply
FROM read_parquet('@ANSWERS@', file_row_number = true)
WHERE mode = 'whole' AND condition IN ('S0', 'S0r', 'SR', 'SP', 'B0', 'B0r', 'BS1', 'BS2', 'BS3', 'BS4', 'ST1');

-- The distinct item orders (a few per test in practice) and what each shown position scores.
CREATE TEMP TABLE orders AS
SELECT CAST(row_number() OVER () AS INTEGER) AS oid, test, item_order
FROM (SELECT DISTINCT test, item_order FROM whole);

CREATE TEMP TABLE shown AS
SELECT s.oid, s.pos, k.dim, k.item, k.rev, k.weight, k.lo, k.hi
FROM (SELECT oid, test, CAST(unnest(o) AS INTEGER) AS item, unnest(range(1, len(o) + 1)) AS pos
      FROM (SELECT oid, test, string_split(item_order, ';') AS o FROM orders)) s
JOIN key k ON k.test = s.test AND k.item = s.item;

-- Answer lines (docs/stored-answers.md 2.2): after trimming, a position, spaces or tabs, one of
-- : . ) = -, and a rest read by the strict rule; lines split at \n. Per administration and
-- scale: complete when each shown position has exactly one answer line (the bit mask of
-- positions has as many bits as there are lines) and every line is ok.
CREATE TEMP TABLE whole_scores AS
SELECT l.rid, s.dim, count(*) AS n_lines, count(l.opt) AS n_ok,
       bit_count(bit_or(CAST(1 AS HUGEINT) << CAST(s.pos AS HUGEINT))) AS n_pos,
       sum(pts(l.opt, l.reversed, s.rev, s.weight, s.lo, s.hi)) AS points
FROM (SELECT rid, oid, reversed, TRY_CAST(a.pos AS INTEGER) AS pos,
             CAST(NULLIF(a.opt, '') AS INTEGER) AS opt
      FROM (SELECT rid, oid, reversed, regexp_extract(line,
                     '^[\t\x{0B}\f\r \x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000}]*([0-9]+)[ \t]*[:.)=-](?:[\t\x{0B}\f\r \x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000}]*0*([1-5])[.)]?[\t\x{0B}\f\r \x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000}]*$)?', ['pos', 'opt']) AS a
            FROM (SELECT w.rid, o.oid, w.reversed, unnest(string_split(w.reply, chr(10))) AS line
                  FROM whole w JOIN orders o ON o.test = w.test AND o.item_order = w.item_order
                  WHERE w.reply IS NOT NULL))) l
JOIN shown s ON s.oid = l.oid AND s.pos = l.pos
GROUP BY l.rid, s.dim;

-- Every scale of every administration, with its score (a rounded percentage of the maximum)
-- and z in human SDs.
CREATE TEMP TABLE scores AS
SELECT a.model, a.condition, a.sample, a.dim, a.complete,
       CAST(round(a.points / d.max_points * 100) AS BIGINT) AS score,
       (round(a.points / d.max_points * 100) - d.mean) / d.sd AS z
FROM (SELECT model, condition, sample, dim, complete, points FROM single_scores
      UNION ALL
      SELECT w.model, w.condition, w.sample, d.dim,
             coalesce(s.n_lines = d.n AND s.n_ok = d.n AND s.n_pos = d.n, false), s.points
      FROM whole w JOIN dims d ON d.test = w.test
      LEFT JOIN whole_scores s ON s.rid = w.rid AND s.dim = d.dim) a
JOIN dims d USING (dim);

-- Per cell (model x scale): kept when each of the ten protocol conditions has an administration,
-- every administration is complete, and both sets have at least two (docs/statistics.md).
CREATE TEMP TABLE cells AS
SELECT model, dim,
       count(*) FILTER (WHERE p) AS protocol_n, count(*) FILTER (WHERE NOT p) AS sampling_n,
       stddev_samp(z) FILTER (WHERE p) AS protocol_sd,
       stddev_samp(z) FILTER (WHERE NOT p) AS sampling_sd,
       -- n^2 x the population variance, exact: only to tell exact ties in the comparison
       CAST(count(*) FILTER (WHERE p) AS HUGEINT) * sum(score * score) FILTER (WHERE p)
         - CAST(sum(score) FILTER (WHERE p) AS HUGEINT) * sum(score) FILTER (WHERE p) AS p_dev,
       CAST(count(*) FILTER (WHERE NOT p) AS HUGEINT) * sum(score * score) FILTER (WHERE NOT p)
         - CAST(sum(score) FILTER (WHERE NOT p) AS HUGEINT) * sum(score) FILTER (WHERE NOT p) AS s_dev
FROM (SELECT *, condition <> 'ST1' AS p,
             list_position(['S0', 'S0r', 'SR', 'SP', 'B0', 'B0r', 'BS1', 'BS2', 'BS3', 'BS4'],
                           condition) AS ci
      FROM scores)
GROUP BY model, dim
HAVING bit_or(CAST(1 AS INTEGER) << ci) FILTER (WHERE p) = 2046 AND bool_and(complete)
   AND count(*) FILTER (WHERE p) >= 2 AND count(*) FILTER (WHERE NOT p) >= 2;

COPY (
  SELECT c.model, d.test, d.dimension, c.protocol_n, c.sampling_n, c.protocol_sd, c.sampling_sd,
         c.protocol_sd / c.sampling_sd AS ratio, c.protocol_sd > c.sampling_sd AS protocol_gt_sampling,
         c.p_dev, c.s_dev
  FROM cells c JOIN dims d USING (dim)
) TO '@OUT@' (FORMAT parquet);
