import { createContext } from 'preact';
import { useContext, useEffect } from 'preact/hooks';
import { StepwiseApiError, type StepwiseClient } from '../client';
import type { TimeZoneChoice } from './time-zone';

/** What every page needs: the typed client, the auto-refresh switch, the time zone, and where to report errors. */
export interface Api {
  client: StepwiseClient;
  basePath: string;
  autoRefresh: boolean;
  /** The zone every instant is shown (and typed) in. */
  timeZone: TimeZoneChoice;
  /** Opens the token dialog (the server answered 401, or 403 to a token of another kind). */
  requestToken(): void;
  navigate(hash: string): void;
}

export const ApiContext = createContext<Api | null>(null);

export function useApi(): Api {
  const api = useContext(ApiContext);
  if (!api) throw new Error('useApi outside ApiContext');
  return api;
}

/**
 * True when the server wants a (different) bearer token: a 401, or a 403 for a token of another kind
 * (a worker token, say) where the dashboard's calls need a client token.
 */
export function isUnauthorized(err: unknown): boolean {
  if (!(err instanceof StepwiseApiError)) return false;
  return err.status === 401 || (err.status === 403 && err.facts?.reason === 'client_token_required');
}

/** Opens the token dialog when any of `errors` wants another token; returns whether one did. */
export function useAuthPrompt(...errors: unknown[]): boolean {
  const api = useApi();
  const unauthorized = errors.some(isUnauthorized);
  useEffect(() => {
    if (unauthorized) api.requestToken();
  }, [unauthorized]);
  return unauthorized;
}
