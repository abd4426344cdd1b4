/** The bearer token, kept only for this browser tab (sessionStorage): never in localStorage or a cookie. */
const TOKEN_KEY = 'stepwise.token';

export function readToken(): string | undefined {
  try {
    return sessionStorage.getItem(TOKEN_KEY) ?? undefined;
  } catch {
    return undefined; // storage disabled: ask again on each load
  }
}

export function saveToken(token: string | undefined): void {
  try {
    if (token) sessionStorage.setItem(TOKEN_KEY, token);
    else sessionStorage.removeItem(TOKEN_KEY);
  } catch {
    // storage disabled: the token lives in memory until the tab closes
  }
}
