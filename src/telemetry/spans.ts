// The shapes of Stepwise's tracing, apart from the SDK that implements them (otel-tracing.ts) and
// from startTracing, which loads that SDK only when asked (tracing.ts).

/** Attribute values a span takes (OpenTelemetry's primitive attribute values). */
export type TraceAttributes = Record<string, string | number | boolean>;

/** What ended a span in failure: a type and a message, never a stack or a payload. */
export interface TracedError {
  type: string;
  message: string;
}

/** One span, as the engine and the API handle it: no OpenTelemetry type leaks out of src/telemetry. */
export interface SpanTrace {
  /** This span as a W3C `traceparent`, to carry the trace on (a child execution stores it). */
  readonly traceparent: string;
  setAttributes(attributes: TraceAttributes): void;
  event(name: string, attributes?: TraceAttributes): void;
  /** Marks the span failed (status ERROR, an `exception` event with the type and message). */
  fail(error: TracedError): void;
  /** Runs `fn` with this span active, so that OpenTelemetry instrumentation inside it nests under it. */
  run<T>(fn: () => T): T;
  /** Ends the span with `stepwise.outcome`; only the first call counts. */
  end(outcome: string): void;
}

/** The span of one claimed run of an execution, parent of its step spans. */
export interface AttemptTrace extends SpanTrace {
  /** `stepwise.step <key>` (ctx.step) or `stepwise.child <key>` (ctx.invoke, ctx.spawn: starts a child execution). */
  startStep(key: string, kind: 'step' | 'child', attributes?: TraceAttributes): SpanTrace;
}

/** A claimed run of an execution, as its span is made. */
export interface AttemptStart {
  executionId: string;
  task: string;
  attempt: number;
  taskVersion: string;
  /** Status before the claim: 'waiting' is a resume, 'running' a takeover. */
  previousStatus: 'pending' | 'running' | 'waiting';
  /** What the execution was scheduled with (see migration 017), or null. */
  traceparent: string | null;
}

/** A delivery of an event to a waiting execution (POST /executions/{id}/events/{name}). */
export interface DeliveryStart {
  executionId: string;
  task: string;
  eventName: string;
  /** The execution's stored traceparent, or null: the delivery links to the execution's trace. */
  executionTraceparent: string | null;
  /** The request's own `traceparent` header: the delivery's parent when it is valid. */
  requestTraceparent: string | undefined;
}

/**
 * Tracing of executions, exported over OTLP/HTTP: made by startTracing only when the standard
 * OTEL_* variables ask for it. Everything that traces holds a `Tracing | null`, so when tracing is
 * off the cost is a null check and no OpenTelemetry SDK module is ever loaded.
 */
export interface Tracing {
  startAttempt(attempt: AttemptStart): AttemptTrace;
  startDelivery(delivery: DeliveryStart): SpanTrace;
  /** Exports the spans still buffered and stops exporting (on shutdown, after the worker and API stopped). */
  shutdown(): Promise<void>;
}

/** How tracing was asked for by the environment. */
export interface TracingSettings {
  serviceName: string;
  /** The OTLP/HTTP encoding: JSON, or protobuf (the specification's default). */
  protocol: 'http/json' | 'http/protobuf';
  /** A protocol asked for that this exporter does not speak (grpc): reported, and protobuf over HTTP used. */
  unsupportedProtocol?: string;
}

/**
 * Whether the standard variables turn tracing on: an OTLP endpoint for traces (or for all signals)
 * is set, and the SDK is not disabled. Undefined when off. The exporter reads the endpoint, headers,
 * timeout and compression itself, from the same variables.
 */
export function readTracingSettings(env: NodeJS.ProcessEnv): TracingSettings | undefined {
  const set = (name: string) => (env[name] ?? '').trim() || undefined;
  if (set('OTEL_SDK_DISABLED')?.toLowerCase() === 'true') return undefined;
  if (!set('OTEL_EXPORTER_OTLP_TRACES_ENDPOINT') && !set('OTEL_EXPORTER_OTLP_ENDPOINT')) return undefined;
  // OTEL_TRACES_EXPORTER=none turns trace export off whatever the endpoint says.
  if (set('OTEL_TRACES_EXPORTER')?.toLowerCase() === 'none') return undefined;
  const asked = (set('OTEL_EXPORTER_OTLP_TRACES_PROTOCOL') ?? set('OTEL_EXPORTER_OTLP_PROTOCOL') ?? 'http/protobuf').toLowerCase();
  const known = asked === 'http/json' || asked === 'http/protobuf';
  return {
    serviceName: set('OTEL_SERVICE_NAME') ?? 'stepwise',
    protocol: known ? asked : 'http/protobuf',
    ...(known ? {} : { unsupportedProtocol: asked }),
  };
}
