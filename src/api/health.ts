import type Router from '@koa/router';
import { ServiceUnavailableError } from '../errors';
import { pingDb } from '../store/db';
import { isMigrated } from '../store/migrate';
import type { ApiDeps } from './deps';
import type { ApiState } from './state';
import { addOperation } from './typed';

/** Liveness, readiness and the contract itself: public, for orchestrators and documentation pages. */
export function addOperationalRoutes(router: Router<ApiState>, deps: ApiDeps): void {
  addOperation(router, deps.routes, 'getHealth', async () => ({ status: 200, body: { status: 'ok' as const } }));

  addOperation(router, deps.routes, 'getReadiness', async () => {
    // Not ready while the database is unreachable or a migration is missing (a newer build started
    // before `stepwise migrate` ran); both answer 503, so load balancers route elsewhere.
    const ready = (await pingDb(deps.db)) && (await isMigrated(deps.db).catch(() => false));
    if (!ready) throw new ServiceUnavailableError();
    return { status: 200, body: { status: 'ok' as const } };
  });

  addOperation(router, deps.routes, 'getOpenApiSpec', async () => ({
    status: 200,
    body: deps.spec.text,
    contentType: 'application/yaml; charset=utf-8',
  }));
}
