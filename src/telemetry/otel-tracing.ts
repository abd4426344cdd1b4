// The only module that loads the OpenTelemetry SDK and exporters: startTracing requires it when the
// environment turns tracing on, never otherwise (test/integration/telemetry.test.ts checks both).
import { context, diag, DiagLogLevel, ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, TraceFlags, type Context, type Span, type Tracer } from '@opentelemetry/api';
import { OTLPTraceExporter as JsonTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { OTLPTraceExporter as ProtobufTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { defaultResource, detectResources, envDetector, resourceFromAttributes } from '@opentelemetry/resources';
import { BatchSpanProcessor, RandomIdGenerator, type IdGenerator } from '@opentelemetry/sdk-trace-base';
import { NodeTracerProvider } from '@opentelemetry/sdk-trace-node';
import { ATTR_SERVICE_NAME, ATTR_SERVICE_VERSION } from '@opentelemetry/semantic-conventions';
import { executionTraceParent, formatTraceparent, parseTraceparent, type TraceParent } from '../domain/traceparent';
import type { Logger } from '../logger';
import type { AttemptStart, AttemptTrace, DeliveryStart, SpanTrace, TraceAttributes, TracedError, Tracing, TracingSettings } from './spans';

const PACKAGE_VERSION = (require('../../package.json') as { version: string }).version;

/**
 * Random ids, except for the one span whose ids are chosen: the first attempt of an execution that
 * came without a trace parent is the root of the trace its id names (see executionTraceParent). The
 * SDK asks for ids synchronously inside startSpan, so setting `chosen` around that call is safe.
 */
class ChosenIds implements IdGenerator {
  private readonly random = new RandomIdGenerator();
  chosen: TraceParent | undefined;
  generateTraceId(): string {
    return this.chosen?.traceId ?? this.random.generateTraceId();
  }
  generateSpanId(): string {
    return this.chosen?.spanId ?? this.random.generateSpanId();
  }
}

/** A remote parent's context, as an OpenTelemetry context to start a span in. */
function remoteContext(parent: TraceParent): Context {
  return trace.setSpanContext(ROOT_CONTEXT, { traceId: parent.traceId, spanId: parent.spanId, traceFlags: parent.sampled ? TraceFlags.SAMPLED : TraceFlags.NONE, isRemote: true });
}

class OtelSpan implements SpanTrace {
  private ended = false;

  constructor(protected readonly span: Span) {}

  get traceparent(): string {
    const c = this.span.spanContext();
    return formatTraceparent({ traceId: c.traceId, spanId: c.spanId, sampled: (c.traceFlags & TraceFlags.SAMPLED) === TraceFlags.SAMPLED });
  }

  setAttributes(attributes: TraceAttributes): void {
    this.span.setAttributes(attributes);
  }

  event(name: string, attributes?: TraceAttributes): void {
    this.span.addEvent(name, attributes);
  }

  fail(error: TracedError): void {
    this.span.addEvent('exception', { 'exception.type': error.type, 'exception.message': error.message });
    this.span.setStatus({ code: SpanStatusCode.ERROR, message: `${error.type}: ${error.message}` });
  }

  run<T>(fn: () => T): T {
    return context.with(trace.setSpan(context.active(), this.span), fn);
  }

  end(outcome: string): void {
    if (this.ended) return;
    this.ended = true;
    this.span.setAttribute('stepwise.outcome', outcome);
    this.span.end();
  }
}

class OtelAttempt extends OtelSpan implements AttemptTrace {
  constructor(
    span: Span,
    private readonly tracer: Tracer,
    private readonly executionId: string,
  ) {
    super(span);
  }

  startStep(key: string, kind: 'step' | 'child', attributes: TraceAttributes = {}): SpanTrace {
    const span = this.tracer.startSpan(
      `stepwise.${kind} ${key}`,
      { kind: kind === 'child' ? SpanKind.PRODUCER : SpanKind.INTERNAL, attributes: { 'stepwise.execution_id': this.executionId, 'stepwise.step': key, 'stepwise.step.kind': kind, ...attributes } },
      trace.setSpan(ROOT_CONTEXT, this.span),
    );
    return new OtelSpan(span);
  }
}

/**
 * Spans of executions: each claimed run is a CONSUMER span (`stepwise.execution <task>`) whose parent
 * is the traceparent the execution was scheduled with; without one, the execution's own trace (see
 * executionTraceParent), whose root is its first attempt. Steps and child starts are its children; an
 * event delivery is a PRODUCER span under the request's traceparent, linked to the execution's trace.
 * Spans go through a BatchSpanProcessor (OTEL_BSP_* apply) to the OTLP/HTTP exporter, which reads
 * the endpoint, headers, timeout and compression from OTEL_EXPORTER_OTLP_*.
 */
export function createOtelTracing(settings: TracingSettings, log: Logger): Tracing {
  // The SDK reports export failures through diag: into this log, warnings and errors only.
  diag.setLogger(
    {
      error: (message: string) => log.warn({ otel: message }, 'opentelemetry error'),
      warn: (message: string) => log.warn({ otel: message }, 'opentelemetry warning'),
      info: () => undefined,
      debug: () => undefined,
      verbose: () => undefined,
    },
    { logLevel: DiagLogLevel.WARN, suppressOverrideMessage: true },
  );
  const exporter = settings.protocol === 'http/json' ? new JsonTraceExporter() : new ProtobufTraceExporter();
  // OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES (the env detector) win over the defaults here.
  const resource = defaultResource()
    .merge(resourceFromAttributes({ [ATTR_SERVICE_NAME]: settings.serviceName, [ATTR_SERVICE_VERSION]: PACKAGE_VERSION }))
    .merge(detectResources({ detectors: [envDetector] }));
  const ids = new ChosenIds();
  const provider = new NodeTracerProvider({ resource, idGenerator: ids, spanProcessors: [new BatchSpanProcessor(exporter)] });
  // Registered globally (unless the process registered its own provider first) so that spans a
  // handler makes with @opentelemetry/api nest under its step's span.
  provider.register();
  const tracer = provider.getTracer('stepwise', PACKAGE_VERSION);
  let stopping: Promise<void> | undefined;

  return {
    startAttempt(a: AttemptStart): AttemptTrace {
      const attributes = { 'stepwise.execution_id': a.executionId, 'stepwise.task': a.task, 'stepwise.attempt': a.attempt, 'stepwise.task_version': a.taskVersion, 'stepwise.previous_status': a.previousStatus };
      const options = { kind: SpanKind.CONSUMER, attributes };
      const name = `stepwise.execution ${a.task}`;
      const stored = parseTraceparent(a.traceparent);
      let span: Span;
      if (stored) span = tracer.startSpan(name, options, remoteContext(stored));
      else if (a.attempt === 1 && a.previousStatus === 'pending') {
        // The first run of an execution without a trace parent is the root of its own trace.
        ids.chosen = executionTraceParent(a.executionId);
        try {
          span = tracer.startSpan(name, { ...options, root: true }, ROOT_CONTEXT);
        } finally {
          ids.chosen = undefined;
        }
      } else span = tracer.startSpan(name, options, remoteContext(executionTraceParent(a.executionId)));
      return new OtelAttempt(span, tracer, a.executionId);
    },

    startDelivery(d: DeliveryStart): SpanTrace {
      const request = parseTraceparent(d.requestTraceparent);
      const target = parseTraceparent(d.executionTraceparent) ?? executionTraceParent(d.executionId);
      const span = tracer.startSpan(
        `stepwise.event ${d.eventName}`,
        {
          kind: SpanKind.PRODUCER,
          attributes: { 'stepwise.execution_id': d.executionId, 'stepwise.task': d.task, 'stepwise.event': d.eventName },
          links: [{ context: { traceId: target.traceId, spanId: target.spanId, traceFlags: target.sampled ? TraceFlags.SAMPLED : TraceFlags.NONE, isRemote: true } }],
        },
        request ? remoteContext(request) : ROOT_CONTEXT,
      );
      return new OtelSpan(span);
    },

    shutdown(): Promise<void> {
      stopping ??= provider.shutdown().catch((err: Error) => log.warn({ err: err.message }, 'exporting the last spans failed'));
      return stopping;
    },
  };
}
