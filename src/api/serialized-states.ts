import { createHash } from 'node:crypto';
import type { ExecutionRecord } from '../store/rows';
import { toExecution } from './representations';

/**
 * An execution's state as the API writes it, made once per read however many answers carry it: the
 * fan-out offers one record to every stream and long-poll of its id, so a 900 KB state is serialized,
 * hashed and encoded once, not once per follower. Each form is made on first use.
 */
export class SerializedState {
  private idMemo: string | undefined;
  private frameMemo: Buffer | undefined;
  private bytesMemo: Buffer | undefined;

  constructor(
    private readonly execution: ExecutionRecord,
    /** The Execution resource's JSON. */
    readonly json: string,
  ) {}

  /** The stream's event id: steps completed and a fingerprint of the JSON (equal ids, equal states, on any server). */
  get id(): string {
    return (this.idMemo ??= `${this.execution.stepsCompleted}-${createHash('sha256').update(this.json).digest('hex').slice(0, 12)}`);
  }

  /** The whole `execution` event of a stream, as bytes every follower's stream writes as they are. */
  get frame(): Buffer {
    return (this.frameMemo ??= Buffer.from(`id: ${this.id}\nevent: execution\ndata: ${this.json}\n\n`));
  }

  /** The JSON as UTF-8, for answers that send it whole. */
  get bytes(): Buffer {
    return (this.bytesMemo ??= Buffer.from(this.json));
  }
}

/** Keyed by the record a read made. Weak: a record nobody holds any more frees its state. */
const states = new WeakMap<ExecutionRecord, SerializedState>();
let made = 0;

/** States serialized so far in this process: one per read a follower or long-poll got, not one per follower. */
export function statesSerialized(): number {
  return made;
}

export function serializedState(execution: ExecutionRecord): SerializedState {
  let state = states.get(execution);
  if (!state) {
    state = new SerializedState(execution, JSON.stringify(toExecution(execution)));
    made += 1;
    states.set(execution, state);
  }
  return state;
}
