/** A W3C trace context's parent: the trace, the parent span in it, and whether it was sampled. */
export interface TraceParent {
  /** 32 lowercase hex digits, not all zero. */
  traceId: string;
  /** 16 lowercase hex digits, not all zero. */
  spanId: string;
  sampled: boolean;
}

/**
 * Version 00 of the `traceparent` header, exactly: `00-<trace id>-<span id>-<flags>`, lowercase hex.
 * Later versions may add fields, which this code could not vouch for when it hands the value on.
 */
const VERSION_00 = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;
const ZERO_TRACE = '0'.repeat(32);
const ZERO_SPAN = '0'.repeat(16);

/**
 * Parses a W3C `traceparent` (Trace Context, version 00) strictly; undefined when it is not one: any
 * other length, case or version, or an all-zero trace or span id, which the specification declares
 * invalid.
 */
export function parseTraceparent(text: string | undefined | null): TraceParent | undefined {
  if (typeof text !== 'string' || text.length !== 55) return undefined;
  const match = VERSION_00.exec(text);
  if (!match || match[1] === ZERO_TRACE || match[2] === ZERO_SPAN) return undefined;
  return { traceId: match[1], spanId: match[2], sampled: (parseInt(match[3], 16) & 1) === 1 };
}

/** The `traceparent` text of a trace parent (version 00; of the flags only `sampled` is kept). */
export function formatTraceparent(parent: TraceParent): string {
  return `00-${parent.traceId}-${parent.spanId}-${parent.sampled ? '01' : '00'}`;
}

/**
 * The trace of an execution scheduled without a trace parent: its trace id is the execution's id
 * (a UUID is 16 bytes, as a trace id is) and its root span's id the id's last 8 bytes, so every
 * attempt, event delivery and child of the execution meets in one trace that its id finds. The first
 * attempt is that root span (see the tracing of attempts); later ones are its children.
 */
export function executionTraceParent(executionId: string): TraceParent {
  const hex = executionId.replace(/-/g, '').toLowerCase();
  return { traceId: hex, spanId: hex.slice(16), sampled: true };
}
