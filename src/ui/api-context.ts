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
  /** Opens the token dialog (the server answered 401). */
  requestToken(): void;
  navigate(hash: string): void;
}

export const ApiContext = createContext<Api | null>(null);

export function useApi(): Api {
  const api = useContext(ApiContext);
  if (!api) throw new Error('useApi outside ApiContext');
  return api;
}

/** True for a 401 answer: the server wants a (different) bearer token. */
export function isUnauthorized(err: unknown): boolean {
  return err instanceof StepwiseApiError && err.status === 401;
}

/** Opens the token dialog when any of `errors` is a 401; returns whether one was. */
export function useAuthPrompt(...errors: unknown[]): boolean {
  const api = useApi();
  const unauthorized = errors.some(isUnauthorized);
  useEffect(() => {
    if (unauthorized) api.requestToken();
  }, [unauthorized]);
  return unauthorized;
}
