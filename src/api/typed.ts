import type Router from '@koa/router';
import type { Readable } from 'node:stream';
import type { Middleware } from 'koa';
import type { operations } from '../../generated/openapi';
import { isTransientConflict } from '../store/db-errors';
import type { CompiledSpec, SpecOperation } from './spec';
import { DETACHED, type Detached } from './detached-responses';
import { readJsonBody } from './request-body';
import { validateRequest } from './validation';
import type { ApiContext, ApiState } from './state';

/** Every operationId of openapi.yaml. */
export type OperationId = keyof operations;
type Op<K extends OperationId> = operations[K];
type Responses<K extends OperationId> = Op<K>['responses'];

/** Handlers answer the success statuses; errors are thrown as AppError and shaped by the error middleware. */
type SuccessStatus<K extends OperationId> = Extract<keyof Responses<K>, 200 | 201 | 202 | 204>;
type ContentOf<R> = R extends { content: infer C } ? C : never;
/** An event stream's body is written while the handler has long returned: a stream, piped by Koa. */
// A response without content (204) has none: [never] is tested apart, since a bare never would match every branch.
type BodyOf<R> = [ContentOf<R>] extends [never]
  ? undefined
  : ContentOf<R> extends { 'text/event-stream': unknown }
    ? Readable
    : ContentOf<R> extends Record<string, infer B>
      ? B
      : undefined;

/** One of the responses the spec lists for K, with exactly the body the spec gives that status. */
export type HandlerResult<K extends OperationId> = {
  [S in SuccessStatus<K>]: { status: S; body: BodyOf<Responses<K>[S]>; contentType?: string };
}[SuccessStatus<K>];

type RequestBodyOf<K extends OperationId> = [NonNullable<Op<K>['requestBody']>] extends [never]
  ? undefined
  : NonNullable<Op<K>['requestBody']> extends { content: { 'application/json': infer B } }
    ? undefined extends Op<K>['requestBody']
      ? B | undefined
      : B
    : undefined;
type ParamsOf<K extends OperationId, Where extends 'path' | 'query'> = [NonNullable<Op<K>['parameters'][Where]>] extends [never]
  ? Record<string, never>
  : NonNullable<Op<K>['parameters'][Where]>;

/** Header parameters by the lower-case names Node gives them. */
type HeadersOf<K extends OperationId> = [NonNullable<Op<K>['parameters']['header']>] extends [never]
  ? Record<string, never>
  : { [P in keyof NonNullable<Op<K>['parameters']['header']> as Lowercase<P & string>]: NonNullable<Op<K>['parameters']['header']>[P] };

/** A handler's validated input, typed from the generated operation. */
export interface HandlerInput<K extends OperationId> {
  params: ParamsOf<K, 'path'>;
  query: ParamsOf<K, 'query'>;
  headers: HeadersOf<K>;
  body: RequestBodyOf<K>;
  ctx: ApiContext;
}

/** A handler answers with a result, or with DETACHED once it answers outside Koa itself (detached-responses.ts). */
export type Handler<K extends OperationId> = (input: HandlerInput<K>) => Promise<HandlerResult<K> | Detached>;

/** Runs of a handler when PostgreSQL rolls its statement back for a deadlock or a serialization failure. */
const CONFLICT_ATTEMPTS = 3;

/** A handler's result, as addOperation writes it to the response. */
type AnyResult = { status: unknown; body: unknown; contentType?: string } | Detached;

/**
 * Runs a handler and writes its result to the response. A handler whose statement lost a deadlock
 * (or a serialization conflict) runs again: the statement was rolled back whole, and every handler
 * writes in one statement, so running it again is safe. A cancel whose row another transaction held
 * could otherwise answer 500 for a conflict that running it again resolves. The last conflict is
 * thrown, and answers 500. One pair of callbacks on the handler's promise, not an async loop around
 * it: a request in flight holds no suspended frame here. A handler that answered outside Koa
 * (DETACHED) has written its response, or will: nothing is set on the context for it.
 */
function answerWith(ctx: ApiContext, run: () => Promise<AnyResult>, attempt = 1): Promise<void> {
  return run().then(
    (result) => {
      if (result === DETACHED) return;
      ctx.status = result.status as number;
      if (result.contentType) ctx.type = result.contentType;
      ctx.body = result.body;
    },
    async (err: unknown) => {
      if (!isTransientConflict(err) || attempt >= CONFLICT_ATTEMPTS) throw err;
      await new Promise((r) => setTimeout(r, 10 + Math.random() * 40 * attempt));
      return answerWith(ctx, run, attempt + 1);
    },
  );
}

/** The auth middleware of one security scheme, for one operation (which may need a token of its own role). */
export type Authenticator = (op: SpecOperation) => Middleware<ApiState>;

/** What every route needs besides its handler. */
export interface RouteOptions {
  spec: CompiledSpec;
  /** By security scheme of openapi.yaml (`bearerAuth`, `metricsToken`): runs first on every operation that declares it. */
  authenticators: Readonly<Record<string, Authenticator>>;
  bodyLimitBytes: number;
  /** How much of a body over the limit is read and thrown away before the 413 (config http.bodyDiscardBytes). */
  bodyDiscardBytes: number;
  jsonMaxDepth: number;
}

/**
 * Mounts the handler of `operationId` at the method and path openapi.yaml gives it, behind the
 * authenticator of the security scheme it declares (if any), body parsing (when it takes a body) and
 * request validation. Because the handler's result is typed from the generated `operations`, a
 * status or body the spec does not list fails the typecheck.
 */
export function addOperation<K extends OperationId>(router: Router<ApiState>, options: RouteOptions, operationId: K, handler: Handler<K>): void {
  const op = options.spec.operations.get(operationId);
  if (!op) throw new Error(`openapi.yaml has no operation ${operationId}`);
  const authenticator = op.securityScheme === undefined ? undefined : options.authenticators[op.securityScheme];
  // A scheme without its middleware would leave the operation open: refuse to start instead.
  if (op.securityScheme !== undefined && !authenticator) throw new Error(`no authenticator for ${op.securityScheme}, which ${operationId} declares`);
  const authenticate = authenticator?.(op);
  const chain = [
    ...(authenticate ? [authenticate] : []),
    ...(op.body ? [readJsonBody({ limitBytes: options.bodyLimitBytes, maxDepth: options.jsonMaxDepth, discardBytes: options.bodyDiscardBytes })] : []),
    validateRequest(op),
    // Not async, like the middleware before it: a request in flight holds no suspended frame here.
    (ctx: ApiContext) => {
      const input = ctx.state.input as NonNullable<ApiState['input']>;
      return answerWith(ctx, () => handler({ params: input.params, query: input.query, headers: input.headers, body: input.body, ctx } as HandlerInput<K>));
    },
  ];
  router.register(op.routerPath, [op.method], chain as never, { name: operationId });
}
