import type { Knex } from 'knex';

/**
 * Values a handler reads back replay byte for byte (issue #33): `steps.result` (a step's result, an
 * event's payload, a child's outcome) and `executions.output` (a child's outcome comes from it, and
 * GET /executions/{id} shows it) become `json`, which keeps the text as written. jsonb sorts an
 * object's keys, so a replay saw `{beta, zeta}` where the first run saw `{zeta, beta}`. Rows written
 * before keep jsonb's order: the first one is gone.
 *
 * The child trigger builds the parent's step with json_build_object, which embeds the output's text.
 *
 * Cost: a type change rewrites each table and rebuilds its indexes under an ACCESS EXCLUSIVE lock, so
 * every worker and API request that touches steps or executions waits for the whole copy, and the disk
 * needs room for a second copy of both. On large tables, run it in a quiet window, after a retention
 * sweep has shrunk them. Stop workers of older builds first: their sleep and timeout completion merges
 * the column as jsonb and fails on json.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    ALTER TABLE stepwise.steps ALTER COLUMN result TYPE json USING result::json;
    ALTER TABLE stepwise.executions ALTER COLUMN output TYPE json USING output::json;
    ${childFinished('json_build_object')}
  `);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`
    ${childFinished('jsonb_build_object')}
    ALTER TABLE stepwise.executions ALTER COLUMN output TYPE jsonb USING output::jsonb;
    ALTER TABLE stepwise.steps ALTER COLUMN result TYPE jsonb USING result::jsonb;
  `);
}

/** Migration 009's child trigger, with the parent's step built by `build`. */
function childFinished(build: 'json_build_object' | 'jsonb_build_object'): string {
  return `
    CREATE OR REPLACE FUNCTION stepwise.child_finished() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE
      parent record;
      step_seq integer;
    BEGIN
      SELECT task, status INTO parent FROM stepwise.executions WHERE id = NEW.parent_id FOR UPDATE;
      IF NOT FOUND THEN
        RETURN NULL;
      END IF;
      -- A result after the wait's deadline loses to the timeout, which the parent records when it wakes.
      UPDATE stepwise.steps
         SET completed = true, completed_at = now(),
             result = ${build}('execution_id', NEW.id, 'status', NEW.status, 'output', NEW.output, 'error', NEW.error)
       WHERE execution_id = NEW.parent_id AND kind = 'child' AND NOT completed AND outcome IS NULL
         AND result->>'execution_id' = NEW.id::text AND (wake_at IS NULL OR wake_at > now())
      RETURNING seq INTO step_seq;
      IF step_seq IS NULL THEN
        RETURN NULL;
      END IF;
      UPDATE stepwise.executions
         SET steps_completed = steps_completed + 1,
             due_at = CASE WHEN parent.status = 'waiting' THEN now() ELSE due_at END
       WHERE id = NEW.parent_id;
      IF parent.status = 'waiting' THEN
        PERFORM pg_notify('stepwise_work', parent.task);
      END IF;
      RETURN NULL;
    END $$;`;
}
