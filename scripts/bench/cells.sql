-- The per-cell table of the aggregate stage, computed by DuckDB from a stored-answer Parquet file
-- (format v1), the scoring key and the human norms. Placeholders @ANSWERS@, @KEY@, @NORMS@ and
-- @OUT@ are replaced by scripts/bench/run_duckdb.py. Conventions: docs/stored-answers.md
-- (strict reply rule), docs/statistics.md (cells, SDs in human SDs).

CREATE TEMP TABLE req AS
SELECT row_number() OVER () AS rid, model, condition, sample, test, mode, item, item_order,
       option_order, reply, coalesce(error, '') <> '' AS failed
FROM read_parquet('@ANSWERS@');

-- Single-item replies: trimmed, one or more ASCII digits, optionally one '.' or ')'; ok for 1..5.
CREATE TEMP TABLE single_ok AS
SELECT model, condition, sample, test, item, option_order,
       CASE WHEN NOT failed
            THEN TRY_CAST(regexp_extract(regexp_replace(reply, '^\s+|\s+$', '', 'g'),
                                         '^0*([1-5])[.)]?$', 1) AS INTEGER) END AS opt
FROM req WHERE mode = 'single';

-- Whole-test replies: answer lines "<position><spaces><sep><rest>", the rest read by the
-- single-item rule; exactly one answer line per shown position, else missing/duplicate.
CREATE TEMP TABLE shown AS
SELECT rid, unnest(generate_series(1, len(l))) AS pos, CAST(unnest(l) AS INTEGER) AS item
FROM (SELECT rid, string_split(item_order, ';') AS l FROM req WHERE mode = 'whole');

CREATE TEMP TABLE answer_lines AS
SELECT rid, TRY_CAST(regexp_extract(line, '^([0-9]+)[ \t]*[:.)=-]', 1) AS BIGINT) AS pos,
       TRY_CAST(regexp_extract(regexp_replace(regexp_replace(line, '^[0-9]+[ \t]*[:.)=-]', ''),
                                              '^\s+|\s+$', '', 'g'),
                               '^0*([1-5])[.)]?$', 1) AS INTEGER) AS opt
FROM (SELECT rid, regexp_replace(unnest(string_split(reply, chr(10))), '^\s+|\s+$', '', 'g') AS line
      FROM req WHERE mode = 'whole' AND NOT failed)
WHERE regexp_matches(line, '^[0-9]+[ \t]*[:.)=-]');

CREATE TEMP TABLE whole_ok AS
SELECT r.model, r.condition, r.sample, r.test, s.item, r.option_order,
       CASE WHEN a.n = 1 THEN a.opt END AS opt
FROM shown s JOIN req r ON r.rid = s.rid
LEFT JOIN (SELECT rid, pos, count(*) AS n, max(opt) AS opt FROM answer_lines GROUP BY rid, pos) a
  ON a.rid = s.rid AND a.pos = s.pos;

CREATE TEMP TABLE vals AS
SELECT model, condition, sample, test, item,
       CASE WHEN opt IS NULL THEN NULL WHEN option_order = 'reversed' THEN 5 - opt ELSE opt - 1 END AS v
FROM (SELECT * FROM single_ok UNION ALL SELECT * FROM whole_ok);

CREATE TEMP TABLE key AS SELECT * FROM read_csv('@KEY@', header = true, all_varchar = true);

-- Scale scores: every key item of the test for every administration; complete when all are ok.
CREATE TEMP TABLE scores AS
SELECT a.model, a.condition, a.sample, a.test, k.dimension,
       count(*) AS n_items, count(v.v) AS n_ok,
       sum(CASE WHEN v.v IS NULL THEN 0.0
                WHEN CAST(k.reverse AS INTEGER) = 1 THEN CAST(k.weight AS DOUBLE) * (CAST(k.scale_max AS INTEGER) - v.v)
                ELSE CAST(k.weight AS DOUBLE) * (v.v - CAST(k.scale_min AS INTEGER)) END) AS points,
       sum(CAST(k.weight AS DOUBLE) * (CAST(k.scale_max AS INTEGER) - CAST(k.scale_min AS INTEGER))) AS max_points
FROM (SELECT DISTINCT model, condition, sample, test FROM req) a
JOIN key k ON k.test = a.test
LEFT JOIN vals v ON v.model = a.model AND v.condition = a.condition AND v.sample = a.sample
  AND v.test = a.test AND v.item = CAST(k.item AS INTEGER)
GROUP BY ALL;

CREATE TEMP TABLE z AS
SELECT s.model, s.condition, s.sample, s.test, s.dimension, s.n_ok = s.n_items AS complete,
       CAST(round(s.points / s.max_points * 100) AS BIGINT) AS score,
       (round(s.points / s.max_points * 100) - n.mean) / n.sd AS z
FROM scores s JOIN read_parquet('@NORMS@') n ON n.test = s.test AND n.dimension = s.dimension;

-- Per cell: kept when all ten protocol conditions and three ST1 samples have a complete score.
COPY (
  SELECT model, test, dimension,
         count(*) FILTER (WHERE p AND complete) AS protocol_n,
         count(*) FILTER (WHERE NOT p AND complete) AS sampling_n,
         stddev_samp(z) FILTER (WHERE p) AS protocol_sd,
         stddev_samp(z) FILTER (WHERE NOT p) AS sampling_sd,
         stddev_samp(z) FILTER (WHERE p) / stddev_samp(z) FILTER (WHERE NOT p) AS ratio,
         stddev_samp(z) FILTER (WHERE p) > stddev_samp(z) FILTER (WHERE NOT p) AS protocol_gt_sampling,
         -- exact integer moments, only to tell exact ties in the comparison
         CAST(count(*) FILTER (WHERE p) AS HUGEINT) * sum(score * score) FILTER (WHERE p)
           - CAST(sum(score) FILTER (WHERE p) AS HUGEINT) * sum(score) FILTER (WHERE p) AS p_dev,
         CAST(count(*) FILTER (WHERE NOT p) AS HUGEINT) * sum(score * score) FILTER (WHERE NOT p)
           - CAST(sum(score) FILTER (WHERE NOT p) AS HUGEINT) * sum(score) FILTER (WHERE NOT p) AS s_dev
  FROM (SELECT *, condition <> 'ST1' AS p FROM z
        WHERE condition IN ('S0','S0r','SR','SP','B0','B0r','BS1','BS2','BS3','BS4','ST1'))
  GROUP BY model, test, dimension
  HAVING count(DISTINCT condition) FILTER (WHERE p AND complete) = 10
     AND count(*) FILTER (WHERE p) = 10 AND bool_and(complete)
     AND count(*) FILTER (WHERE NOT p AND complete) = 3
  ORDER BY model, test, dimension
) TO '@OUT@' (FORMAT parquet);
