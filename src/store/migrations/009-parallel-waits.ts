import type { Knex } from 'knex';

/**
 * Durable operations in parallel, step retries and deadlines that hold.
 *
 * - `steps.event_name`: an execution may wait for several events at once, so a delivery finds the
 *   open wait by its event's name (the step's name is numbered when repeated). Open waits written
 *   before this migration get it from the execution's single `wait_event_name`.
 * - `steps.outcome`: 'failed' (a step whose retries ran out, with `error`) or 'cancelled' (an open
 *   step, sleep or wait of a cancelled execution); NULL for the rest, told apart by `completed`.
 * - `steps.failures`: every failed attempt of a step, oldest first (bounded by its retry policy).
 * - `executions.attempts_since_progress`: the task's attempt budget counts attempts that recorded no
 *   step since the last one that did; a claim adds one, a recorded step starts it over.
 * - The child trigger wakes a waiting parent whatever it waits for (it may wait for several things at
 *   once), and leaves a child step whose deadline (ctx.invoke's timeout) has passed to the timeout.
 *
 * The new columns are nullable or have constant defaults: no table rewrite.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    ALTER TABLE stepwise.steps ADD COLUMN event_name text;
    ALTER TABLE stepwise.steps ADD COLUMN outcome text CHECK (outcome IN ('failed', 'cancelled'));
    ALTER TABLE stepwise.steps ADD COLUMN error jsonb;
    ALTER TABLE stepwise.steps ADD COLUMN failures jsonb;
    ALTER TABLE stepwise.executions ADD COLUMN attempts_since_progress integer NOT NULL DEFAULT 0;

    UPDATE stepwise.steps s SET event_name = e.wait_event_name
      FROM stepwise.executions e
     WHERE s.execution_id = e.id AND s.kind = 'event' AND NOT s.completed AND e.wait_event_name IS NOT NULL AND e.current_step = s.name;
    UPDATE stepwise.steps SET event_name = regexp_replace(name, '#[0-9]+$', '') WHERE kind = 'event' AND event_name IS NULL;

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
             result = jsonb_build_object('execution_id', NEW.id, 'status', NEW.status, 'output', NEW.output, 'error', NEW.error)
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
    END $$;
  `);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE OR REPLACE FUNCTION stepwise.child_finished() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE
      parent record;
      step_name text;
      woke boolean;
    BEGIN
      SELECT task, status, current_step, wait_event_name INTO parent
        FROM stepwise.executions WHERE id = NEW.parent_id FOR UPDATE;
      IF NOT FOUND THEN
        RETURN NULL;
      END IF;
      UPDATE stepwise.steps
         SET completed = true, completed_at = now(),
             result = jsonb_build_object('execution_id', NEW.id, 'status', NEW.status, 'output', NEW.output, 'error', NEW.error)
       WHERE execution_id = NEW.parent_id AND kind = 'child' AND NOT completed AND result->>'execution_id' = NEW.id::text
      RETURNING name INTO step_name;
      IF step_name IS NULL THEN
        RETURN NULL;
      END IF;
      woke := parent.status = 'waiting' AND parent.current_step = step_name AND parent.wait_event_name IS NULL;
      UPDATE stepwise.executions
         SET steps_completed = steps_completed + 1, due_at = CASE WHEN woke THEN now() ELSE due_at END
       WHERE id = NEW.parent_id;
      IF woke THEN
        PERFORM pg_notify('stepwise_work', parent.task);
      END IF;
      RETURN NULL;
    END $$;
    ALTER TABLE stepwise.executions DROP COLUMN attempts_since_progress;
    ALTER TABLE stepwise.steps DROP COLUMN failures;
    ALTER TABLE stepwise.steps DROP COLUMN error;
    ALTER TABLE stepwise.steps DROP COLUMN outcome;
    ALTER TABLE stepwise.steps DROP COLUMN event_name;
  `);
}
