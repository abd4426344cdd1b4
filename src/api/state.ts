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
}

export type ApiContext = ParameterizedContext<ApiState>;
