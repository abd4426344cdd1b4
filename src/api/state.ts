import type { ParameterizedContext } from 'koa';

/** A request's input after validation against openapi.yaml (defaults applied, limits clamped). */
export interface ValidatedInput {
  params: Record<string, string>;
  query: Record<string, unknown>;
  /** The header parameters the operation declares, by lower-case name. */
  headers: Record<string, unknown>;
  body: unknown;
}

/** What the API's middleware keeps on `ctx.state`. */
export interface ApiState {
  requestId: string;
  /** The request body as parsed JSON; undefined when the request had none. */
  body?: unknown;
  input?: ValidatedInput;
  /** Timing and observers (metrics, access log), for a handler that answers outside Koa. */
  observation?: RequestReport;
}

export type ApiContext = ParameterizedContext<ApiState>;

/** What observers are told of a request: plain values, so an answer written after Koa let go holds no context. */
export interface ObservedRequest {
  requestId: string;
  method: string;
  /** The route template (never the raw path, which holds ids), or `unmatched`. */
  route: string;
  status: number;
}

/** A request's report to its observers (RequestObservation in request-observers.ts). */
export interface RequestReport {
  /** The chain's end no longer reports this request; the caller will, through ended(). */
  detach(): void;
  ended(request: ObservedRequest): void;
}
