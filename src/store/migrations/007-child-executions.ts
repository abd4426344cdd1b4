import type { Knex } from 'knex';

/**
 * Child executions (ctx.invoke, ctx.spawn). `parent_id` names the execution that started one; the
 * parent records the child as a step of kind `child` in the same statement that inserts it, so the
 * step exists before the child can run. Two triggers: the first gated by a WHEN that executions
 * without a parent never pass, so completions pay only that test; the second runs on every cancel:
 *
 * - A child that finishes (completed, failed or cancelled) completes its parent's `child` step with
 *   its outcome and, when the parent is waiting for that very step, makes the parent due and wakes the
 *   workers. It locks the parent's row first, the lock the parent's suspension takes too, and every
 *   statement of a plpgsql function sees what committed before it ran: whichever of the two comes
 *   second sees the other's work, so a wake-up cannot fall between them.
 * - A cancelled execution cancels its unfinished children in the same transaction, and they theirs.
 *
 * The nullable column is added without a table rewrite; the list index covers only rows with a parent.
 * The steps' kind constraint is replaced by a wider one, added NOT VALID and then validated, which
 * does not block writers.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    ALTER TABLE stepwise.executions ADD COLUMN parent_id uuid;
    CREATE INDEX executions_parent_created_idx ON stepwise.executions (parent_id, created_at, id) WHERE parent_id IS NOT NULL;

    ALTER TABLE stepwise.steps DROP CONSTRAINT steps_kind_check;
    ALTER TABLE stepwise.steps ADD CONSTRAINT steps_kind_check CHECK (kind IN ('step','sleep','event','child')) NOT VALID;
    ALTER TABLE stepwise.steps VALIDATE CONSTRAINT steps_kind_check;

    CREATE FUNCTION stepwise.child_finished() RETURNS trigger LANGUAGE plpgsql AS $$
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
      -- Waiting in this very step (names are unique within an execution); due_at is its timeout, if any.
      woke := parent.status = 'waiting' AND parent.current_step = step_name AND parent.wait_event_name IS NULL;
      UPDATE stepwise.executions
         SET steps_completed = steps_completed + 1, due_at = CASE WHEN woke THEN now() ELSE due_at END
       WHERE id = NEW.parent_id;
      IF woke THEN
        PERFORM pg_notify('stepwise_work', parent.task);
      END IF;
      RETURN NULL;
    END $$;

    CREATE TRIGGER executions_child_finished AFTER UPDATE OF status ON stepwise.executions
      FOR EACH ROW
      WHEN (NEW.parent_id IS NOT NULL AND NEW.status IN ('completed','failed','cancelled') AND OLD.status IN ('pending','running','waiting'))
      EXECUTE FUNCTION stepwise.child_finished();

    CREATE FUNCTION stepwise.cancel_children() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE
      child record;
    BEGIN
      FOR child IN
        UPDATE stepwise.executions
           SET status = 'cancelled', completed_at = clock_timestamp(), due_at = NULL, lease_token = NULL,
               current_step = NULL, wait_event_name = NULL, wait_since = NULL, wait_timeout_at = NULL,
               error = jsonb_build_object('type', 'cancelled', 'message', 'its parent execution ' || NEW.id || ' was cancelled', 'retryable', false)
         WHERE parent_id = NEW.id AND status IN ('pending','running','waiting')
        RETURNING id
      LOOP
        -- A worker running it aborts its handler; long-polls on it answer.
        PERFORM pg_notify('stepwise_cancel', child.id::text), pg_notify('stepwise_changed', child.id::text);
      END LOOP;
      RETURN NULL;
    END $$;

    CREATE TRIGGER executions_cancel_children AFTER UPDATE OF status ON stepwise.executions
      FOR EACH ROW
      WHEN (NEW.status = 'cancelled' AND OLD.status IN ('pending','running','waiting'))
      EXECUTE FUNCTION stepwise.cancel_children();
  `);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`
    DROP TRIGGER executions_cancel_children ON stepwise.executions;
    DROP FUNCTION stepwise.cancel_children();
    DROP TRIGGER executions_child_finished ON stepwise.executions;
    DROP FUNCTION stepwise.child_finished();
    ALTER TABLE stepwise.steps DROP CONSTRAINT steps_kind_check;
    DELETE FROM stepwise.steps WHERE kind = 'child';
    ALTER TABLE stepwise.steps ADD CONSTRAINT steps_kind_check CHECK (kind IN ('step','sleep','event'));
    DROP INDEX stepwise.executions_parent_created_idx;
    ALTER TABLE stepwise.executions DROP COLUMN parent_id;
  `);
}
