/**
 * The operator's display choices, kept in localStorage across tabs and visits: only things that
 * are safe to persist (never the token, which session.ts keeps for the tab alone).
 */
import { isTimeZoneChoice, type TimeZoneChoice } from './time-zone';

const TIME_ZONE_KEY = 'stepwise.timeZone';

/** The zone instants are shown in: UTC until the operator picks another. */
export function readTimeZone(): TimeZoneChoice {
  try {
    const saved = localStorage.getItem(TIME_ZONE_KEY);
    return isTimeZoneChoice(saved) ? saved : 'utc';
  } catch {
    return 'utc'; // storage disabled
  }
}

export function saveTimeZone(zone: TimeZoneChoice): void {
  try {
    localStorage.setItem(TIME_ZONE_KEY, zone);
  } catch {
    // storage disabled: the choice lasts until the page reloads
  }
}

/** The browser's zone by name (`Europe/Berlin`), for the switch's label; undefined when unknown. */
export function browserTimeZoneName(): string | undefined {
  try {
    return Intl.DateTimeFormat().resolvedOptions().timeZone || undefined;
  } catch {
    return undefined;
  }
}
