import type { Knex } from 'knex';

/**
 * Cancelling an execution's unfinished descendants moves from a trigger into the cancel statement
 * itself (store/transitions/cancel.ts), which already locked that subtree: every status change is
 * now made by a statement in store/transitions, where the moves are declared and checked. The
 * trigger that completes a parent's child step when a child finishes stays (it changes no status).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    DROP TRIGGER executions_cancel_children ON stepwise.executions;
    DROP FUNCTION stepwise.cancel_children();
  `);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`
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
