import pg from 'pg';
import { inlineParameters } from '../../src/store/inline-parameters';

describe('inlineParameters', () => {
  test('replaces each $n by its value, in parentheses, wherever it appears', () => {
    expect(inlineParameters('SELECT $1::int + $2, $1 LIMIT $10', ['1', '2', '3', '4', '5', '6', '7', '8', '9', '10'])).toBe('SELECT (1)::int + (2), (1) LIMIT (10)');
  });

  test('leaves literals, quoted identifiers and identifiers holding $ as they are', () => {
    const name = pg.escapeLiteral("it's $1 \\ $2");
    expect(inlineParameters(`SELECT ${name}, "a$1""$2", x$1, $1`, ["'v'"])).toBe(`SELECT ${name}, "a$1""$2", x$1, ('v')`);
    expect(inlineParameters("SELECT 'a''$1', $1", ['7'])).toBe("SELECT 'a''$1', (7)");
  });

  test('a parameter without a value is an error, not a silent NULL', () => {
    expect(() => inlineParameters('SELECT $3', ['1'])).toThrow('statement parameter $3 has no value (1 given)');
  });
});
