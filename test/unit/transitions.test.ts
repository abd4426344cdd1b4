// Every status change is a move declared in src/store/transitions/moves.ts, written by a statement in
// that folder, and legal in domain/status.ts's table.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { canTransition, EXECUTION_STATUSES, isTerminal } from '../../src/domain/status';
import { CANCEL, MOVES, startsFrom, writes } from '../../src/store/transitions/moves';

const SRC = path.join(__dirname, '..', '..', 'src');

function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const full = path.join(dir, name);
    return statSync(full).isDirectory() ? sourceFiles(full) : /\.tsx?$/.test(name) ? [full] : [];
  });
}

test.each(MOVES.map((m) => [m.name, m] as const))('every from/to of the %s move is legal in the transition table', (_name, move) => {
  for (const from of move.from) for (const to of move.to) expect({ from, to, legal: canTransition(from, to) }).toEqual({ from, to, legal: true });
});

test('cancel starts from exactly the statuses that are not terminal', () => {
  expect([...CANCEL.from].sort()).toEqual(EXECUTION_STATUSES.filter((s) => !isTerminal(s)).sort());
});

test('a statement cannot write a status its move does not declare', () => {
  const complete = MOVES.find((m) => m.name === 'complete');
  expect(() => writes(complete!, 'failed')).toThrow('the complete move does not write status failed');
  expect(writes(complete!, 'completed')).toBe("'completed'");
  expect(startsFrom(CANCEL, 'e.status')).toBe("e.status IN ('pending', 'running', 'waiting')");
});

test('no statement outside src/store/transitions sets a status (migrations before 008 are history)', () => {
  // An execution's status: other tables have statuses of their own (webhook deliveries).
  const setsStatus = /\bUPDATE\s+stepwise\.executions\b(?:(?!\bUPDATE\b)[\s\S])*?\bSET\s+status\s*=/i;
  const offenders = sourceFiles(SRC)
    .filter((f) => !f.includes(`${path.sep}transitions${path.sep}`))
    .filter((f) => !/migrations[\\/]00[1-8]-/.test(f))
    .filter((f) => setsStatus.test(readFileSync(f, 'utf8')))
    .map((f) => path.relative(SRC, f));
  expect(offenders).toEqual([]);
});

test('every statement in src/store/transitions writes its statuses through its move', () => {
  const dir = path.join(SRC, 'store', 'transitions');
  for (const file of readdirSync(dir).filter((f) => f !== 'moves.ts')) {
    const text = readFileSync(path.join(dir, file), 'utf8');
    // A literal status after SET would bypass the move's declaration.
    expect({ file, literal: /SET\s+status\s*=\s*'/i.test(text) || /THEN\s+'(pending|running|waiting|completed|failed|cancelled)'/.test(text) }).toEqual({ file, literal: false });
  }
});
