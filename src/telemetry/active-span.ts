import { isSpanContextValid, trace, TraceFlags } from '@opentelemetry/api';
import { formatTraceparent } from '../domain/traceparent';

/**
 * The caller's active span as a W3C traceparent, or undefined when there is none. Read through
 * @opentelemetry/api, whose global registry the caller's own OpenTelemetry setup fills (the API
 * alone is a no-op: without a registered context manager nothing is ever active). Formatted here
 * rather than through propagation.inject, which needs a registered propagator.
 */
export function activeTraceparent(): string | undefined {
  const span = trace.getActiveSpan();
  if (!span) return undefined;
  const c = span.spanContext();
  if (!isSpanContextValid(c)) return undefined;
  return formatTraceparent({ traceId: c.traceId, spanId: c.spanId, sampled: (c.traceFlags & TraceFlags.SAMPLED) === TraceFlags.SAMPLED });
}
