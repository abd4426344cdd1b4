import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';

/** Figures of one workload by name (statements, roundTrips, ...): per execution, or per second when idle. */
export type Figures = Record<string, number>;

/** The checked-in budget: per PostgreSQL major version, per workload, its figures. */
export interface Budget {
  about: string;
  executions: number;
  postgres: Record<string, Record<string, Figures>>;
}

export const BUDGET_FILE = path.join(__dirname, 'cost-budget.json');

/** A figure fails above budget * (1 + TOLERANCE); one below budget * LOW_MARK earns a note to lower it. */
export const TOLERANCE = 0.1;
export const LOW_MARK = 0.8;

export function readBudget(): Budget {
  return JSON.parse(readFileSync(BUDGET_FILE, 'utf8')) as Budget;
}

/** Writes this server's measured figures in place of its section (UPDATE_BUDGET=1), keeping the others. */
export function writeBudget(budget: Budget, major: number, measured: Record<string, Figures>): void {
  const next: Budget = { ...budget, postgres: { ...budget.postgres, [String(major)]: measured } };
  next.postgres = Object.fromEntries(Object.entries(next.postgres).sort(([a], [b]) => Number(a) - Number(b)));
  writeFileSync(BUDGET_FILE, `${JSON.stringify(next, null, 2)}\n`);
}

export interface Verdict {
  table: string;
  /** "workload figure: measured > limit" for each figure over its limit, or missing from the budget. */
  over: string[];
  /** Figures far under their budget: the budget should come down. */
  under: string[];
}

const show = (n: number | undefined) => (n === undefined ? '-' : Number.isInteger(n) ? String(n) : n.toFixed(2));

/** Measured against budgeted, one row per workload and figure. */
export function judge(measured: Record<string, Figures>, budgeted: Record<string, Figures> | undefined): Verdict {
  const rows: string[][] = [['workload', 'figure', 'measured', 'budget', 'ratio', '']];
  const over: string[] = [];
  const under: string[] = [];
  for (const [workload, figures] of Object.entries(measured)) {
    for (const [figure, value] of Object.entries(figures)) {
      const limit = budgeted?.[workload]?.[figure];
      let mark = '';
      if (budgeted && limit === undefined) {
        mark = 'NOT IN BUDGET';
        over.push(`${workload} ${figure}: ${show(value)} has no budget`);
      } else if (limit !== undefined && value > limit * (1 + TOLERANCE)) {
        mark = 'OVER';
        over.push(`${workload} ${figure}: ${show(value)} > ${show(limit)} + ${TOLERANCE * 100} %`);
      } else if (limit !== undefined && value < limit * LOW_MARK) {
        mark = 'far under: lower the budget';
        under.push(`${workload} ${figure}: ${show(value)} < ${show(limit)} * ${LOW_MARK}`);
      }
      const ratio = limit ? (value / limit).toFixed(2) : '-';
      rows.push([workload, figure, show(value), show(limit), ratio, mark]);
    }
  }
  const widths = rows[0].map((_, c) => Math.max(...rows.map((r) => r[c].length)));
  const table = rows.map((r) => r.map((cell, c) => (c >= 2 && c <= 4 ? cell.padStart(widths[c]) : cell.padEnd(widths[c]))).join('  ').trimEnd()).join('\n');
  return { table, over, under };
}
