-- A stored-answer set (format v1, docs/stored-answers.md) with the study's design, written by
-- DuckDB, not by protospread. Placeholders @MODELS@, @SEED@ and @WHERE@ are replaced by
-- scripts/bench/write_answers.py, which runs this in DuckDB 2.0.1 (pinned by scripts/bench.sh);
-- @WHERE@ limits the administrations written (TRUE for all of them).
--
-- Per model: the 4 tests (168 items) under S0, S0r, SR, SP (single-item mode), ST1 (single-item
-- mode, samples 1..3, temperature 1) and B0, B0r, BS1..BS4 (whole-test mode; BS* items shuffled
-- by order seeds 101..104). Three models in sixteen are in the arm `local` with no temperature
-- and no ST1 (their cells are dropped: no sampling administrations). Every draw is DuckDB's
-- hash of (seed, what it is drawn for), so the same seed and model count give the same rows.
-- Replies: about 2% prose (a single-item refusal or label, a whole-test reply with no answer
-- lines), about 0.5% out-of-range numbers (a single-item reply or one answer line), 1% of
-- whole-test replies without one answer line and 1% with one repeated, one request in 2,000
-- failed (a timeout, empty reply).

CREATE TEMP MACRO unit(h) AS CAST(h >> 11 AS DOUBLE) / 9007199254740992.0;

CREATE TEMP TABLE tests AS
SELECT * FROM (VALUES ('big_five', 50), ('riasec', 60), ('dark_triad', 18),
                      ('multiple_intelligences', 40)) t(test, n);

CREATE TEMP TABLE conds AS
SELECT * FROM (VALUES ('S0', 'single', 1, NULL), ('S0r', 'single', 1, NULL),
                      ('SR', 'single', 1, NULL), ('SP', 'single', 1, NULL),
                      ('ST1', 'single', 3, NULL), ('B0', 'whole', 1, NULL),
                      ('B0r', 'whole', 1, NULL), ('BS1', 'whole', 1, 101),
                      ('BS2', 'whole', 1, 102), ('BS3', 'whole', 1, 103),
                      ('BS4', 'whole', 1, 104)) c(condition, mode, samples, order_seed);

CREATE TEMP TABLE models AS
SELECT m, printf('bench-model-%06d', m) AS model,
       CASE WHEN m % 16 IN (2, 7, 12) THEN 'local' ELSE 'api' END AS arm,
       CASE WHEN m % 4 = 0 THEN 'pilot' ELSE 'full' END AS cohort
FROM range(@MODELS@) r(m);

-- One row per administration (model, condition, sample, test).
CREATE TEMP TABLE adm AS
SELECT mo.m, mo.model, mo.arm, mo.cohort, c.condition, c.mode, CAST(s.sample AS INTEGER) AS sample,
       t.test, t.n, c.order_seed
FROM models mo CROSS JOIN conds c CROSS JOIN tests t
CROSS JOIN LATERAL (SELECT unnest(range(1, c.samples + 1)) AS sample) s
WHERE NOT (mo.arm = 'local' AND c.condition = 'ST1') AND (@WHERE@);

-- Shown order of every whole-test condition and test: human order, or a shuffle by order seed.
CREATE TEMP TABLE shown AS
SELECT condition, test, item,
       CAST(row_number() OVER (PARTITION BY condition, test
                               ORDER BY CASE WHEN order_seed IS NULL THEN 0
                                             ELSE hash(order_seed, test, item) END, item)
            AS INTEGER) AS pos
FROM conds c CROSS JOIN tests t CROSS JOIN LATERAL (SELECT unnest(range(1, t.n + 1)) AS item) i
WHERE c.mode = 'whole';

-- The option (1..5) a model gives to an item: its level on the test, a shift per condition, an
-- item deviation, and temperature-1 noise for ST1 (as protospread's own simulation does).
CREATE TEMP MACRO opt(m, condition, sample, test, item) AS
  CAST(greatest(1, least(5, round(
      1 + 3 * unit(hash(@SEED@, m, test, 'level'))
      + 1.2 * (unit(hash(@SEED@, m, test, condition, 'shift')) - 0.5)
      + (unit(hash(@SEED@, m, test, item, 'item')) - 0.5)
      + CASE WHEN condition = 'ST1'
             THEN 1.5 * (unit(hash(@SEED@, m, test, condition, sample, item, 'noise')) - 0.5)
             ELSE 0 END))) AS INTEGER);

CREATE TEMP TABLE records AS
WITH single AS (
  SELECT a.*, CAST(i.item AS INTEGER) AS item,
         unit(hash(@SEED@, a.m, a.condition, a.sample, a.test, i.item, 'failed')) < 0.0005 AS failed,
         unit(hash(@SEED@, a.m, a.condition, a.sample, a.test, i.item, 'reply')) AS u,
         hash(@SEED@, a.m, a.condition, a.sample, a.test, i.item, 'pick') AS pick
  FROM adm a CROSS JOIN LATERAL (SELECT unnest(range(1, a.n + 1)) AS item) i
  WHERE a.mode = 'single'
), whole_lines AS (
  SELECT a.m, a.condition, a.sample, a.test, a.n, s.pos,
         CASE WHEN unit(hash(@SEED@, a.m, a.condition, a.sample, a.test, s.pos, 'line')) < 0.005
              THEN '6' ELSE CAST(opt(a.m, a.condition, a.sample, a.test, s.item) AS VARCHAR) END AS val
  FROM adm a JOIN shown s ON s.condition = a.condition AND s.test = a.test
  WHERE a.mode = 'whole'
), whole_text AS (
  -- One reply in 100 leaves out an answer line, one in 100 repeats one at its end (the position
  -- then has two answer lines, so it is not answered).
  SELECT m, condition, sample, test,
         string_agg(CAST(pos AS VARCHAR) || ': ' || val, chr(10) ORDER BY pos)
           FILTER (WHERE NOT (pos = 1 + hash(@SEED@, m, condition, sample, test, 'skip_at') % n
                              AND unit(hash(@SEED@, m, condition, sample, test, 'skip')) < 0.01))
         || CASE WHEN unit(hash(@SEED@, m, condition, sample, test, 'repeat')) < 0.01
                 THEN chr(10) || string_agg(CAST(pos AS VARCHAR) || ': ' || val, '')
                      FILTER (WHERE pos = 1 + hash(@SEED@, m, condition, sample, test, 'repeat_at') % n)
                 ELSE '' END AS lines
  FROM whole_lines GROUP BY m, condition, sample, test, n
), orders AS (
  SELECT condition, test, string_agg(CAST(item AS VARCHAR), ';' ORDER BY pos) AS item_order
  FROM shown GROUP BY ALL
)
SELECT a.model, a.arm, a.cohort, a.condition, a.sample, a.test, a.mode, a.item,
       CAST(NULL AS VARCHAR) AS item_order, CAST(NULL AS BIGINT) AS order_seed,
       CASE WHEN a.failed THEN ''
            WHEN a.u < 0.02 THEN ['I''d rather not answer that.', '3 - Moderately Accurate',
                                  'As an AI, I don''t have personal preferences.',
                                  'Answer: 4'][CAST(1 + a.pick % 4 AS BIGINT)]
            WHEN a.u < 0.025 THEN ['0', '6', '7'][CAST(1 + a.pick % 3 AS BIGINT)]
            ELSE [CAST(x.shown AS VARCHAR), CAST(x.shown AS VARCHAR) || '.',
                  ' ' || CAST(x.shown AS VARCHAR) || chr(10), CAST(x.shown AS VARCHAR),
                  CAST(x.shown AS VARCHAR), CAST(x.shown AS VARCHAR), CAST(x.shown AS VARCHAR),
                  CAST(x.shown AS VARCHAR), CAST(x.shown AS VARCHAR),
                  CAST(x.shown AS VARCHAR)][CAST(1 + a.pick % 10 AS BIGINT)] END AS reply,
       CASE WHEN a.failed THEN 'timeout' END AS error
FROM single a,
     LATERAL (SELECT CASE WHEN a.condition = 'SR' THEN 6 - opt(a.m, a.condition, a.sample, a.test, a.item)
                          ELSE opt(a.m, a.condition, a.sample, a.test, a.item) END AS shown) x
UNION ALL
SELECT a.model, a.arm, a.cohort, a.condition, a.sample, a.test, a.mode, CAST(NULL AS INTEGER),
       o.item_order, CAST(a.order_seed AS BIGINT),
       CASE WHEN f.failed THEN ''
            WHEN unit(hash(@SEED@, a.m, a.condition, a.sample, a.test, 'reply')) < 0.02
              THEN 'I''m sorry, but I can''t complete this questionnaire as an AI.'
            WHEN unit(hash(@SEED@, a.m, a.condition, a.sample, a.test, 'intro')) < 0.3
              THEN 'Here are my answers:' || chr(10) || chr(10) || w.lines || chr(10)
            ELSE w.lines || chr(10) END,
       CASE WHEN f.failed THEN 'timeout' END
FROM adm a JOIN whole_text w USING (m, condition, sample, test)
JOIN orders o USING (condition, test),
     LATERAL (SELECT unit(hash(@SEED@, a.m, a.condition, a.sample, a.test, 'failed')) < 0.0005 AS failed) f
WHERE a.mode = 'whole';

-- The columns of the format, in a harness's order; no label (the input's label applies).
CREATE TEMP VIEW stored AS
SELECT 1 AS format_version, 'bench-study' AS study, model, arm, cohort, condition, sample, test,
       mode, item, item_order, order_seed,
       CASE WHEN condition = 'SR' THEN 'reversed' ELSE 'human' END AS option_order,
       CASE WHEN condition = 'SP' THEN 'P2' ELSE 'P1' END AS instruction,
       CAST(CASE WHEN arm = 'local' THEN NULL WHEN condition = 'ST1' THEN 1 ELSE 0 END AS DOUBLE)
         AS temperature,
       reply, error
FROM records;
