/** What one Stepwise-only extra scenario reports: a line for the summary, figures for the result file. */
export interface ExtraResult {
  label: string;
  summary: string;
  values: Record<string, number | boolean | string>;
  /** A table printed under the extras (header row first), with notes under it. */
  table?: string[][];
  notes?: string[];
  /** Every repetition's figures, for the result file. */
  runs?: unknown;
}
