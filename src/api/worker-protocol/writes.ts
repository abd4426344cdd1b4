import { GroupCommitter, landedFlags } from '../../group-commit';
import type { Db } from '../../store/db';
import { isDatabaseUnavailable } from '../../store/db-errors';
import { recordStepResults, stepKey, type StepResult } from '../../store/steps';
import { completeExecutionsFindingParents, type Completion } from '../../store/transitions/complete';

/** How long, and how many, answers of finishing writes are kept to answer a repeat the same way. */
const ANSWERS_KEPT_MS = 10 * 60 * 1000;
const ANSWERS_KEPT = 100_000;

/**
 * The answers of writes that end a lease (complete, fail, suspend, release), by operation and lease
 * token, for a while: the lease no longer holds once such a write landed, so a repeat (a worker that
 * lost the answer and sends again) would be refused by its fence, though it changed nothing. A
 * token is one claim's alone, so finding it here means the same worker asks again: it gets the
 * first answer. A repeat that reaches another API server is refused (lease_lost), still harmlessly.
 */
export class FinishedAnswers<A> {
  private readonly answers = new Map<string, { answer: A; at: number }>();

  remember(op: string, token: string, answer: A): void {
    const key = `${op}:${token}`;
    this.answers.delete(key);
    this.answers.set(key, { answer, at: Date.now() });
    // Insertion order is age order: the oldest go first.
    while (this.answers.size > ANSWERS_KEPT) this.answers.delete(this.answers.keys().next().value as string);
  }

  recall(op: string, token: string): A | undefined {
    const kept = this.answers.get(`${op}:${token}`);
    if (!kept) return undefined;
    if (Date.now() - kept.at > ANSWERS_KEPT_MS) {
      this.answers.delete(`${op}:${token}`);
      return undefined;
    }
    return kept.answer;
  }
}

/**
 * The API server's group commits for its remote workers: step records and completions arriving in the
 * same turn, from any number of workers, share one statement and one commit. Step records always
 * take the idempotent form (a remote worker may send one again after a lost answer).
 */
export function createWriteBatchers(db: Db): { steps: GroupCommitter<StepResult, boolean>; completions: GroupCommitter<Completion, boolean> } {
  return {
    steps: new GroupCommitter(landedFlags((items: StepResult[]) => recordStepResults(db, items), (s) => stepKey(s.id, s.seq)), isDatabaseUnavailable),
    completions: new GroupCommitter(landedFlags((items: Completion[]) => completeExecutionsFindingParents(db, items), (c) => `${c.id}:${c.token}`), isDatabaseUnavailable),
  };
}
