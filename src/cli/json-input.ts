/** JSON given to an operator command inline, in a file, or on stdin (`-`). */
import fs from 'node:fs/promises';
import { UsageError } from './failures';

export interface JsonSource {
  /** The positional argument: JSON text, or `-` for stdin. */
  inline?: string;
  /** A file option's value: a path, or `-` for stdin. */
  file?: string;
  /** How the input is named in messages, such as `DATA_JSON`. */
  name: string;
  /** The file option's flag, such as `--data-file`. */
  fileFlag: string;
  /** The value when neither is given. */
  fallback: unknown;
}

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

async function readFileText(file: string, flag: string): Promise<string> {
  try {
    return await fs.readFile(file, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    throw new UsageError(code === 'ENOENT' ? `${flag} ${file} does not exist` : `${flag} ${file} cannot be read (${code ?? (err as Error).message})`);
  }
}

/** Parses `text` as JSON, or throws a UsageError naming the input. */
export function parseJsonText(text: string, name: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch (err) {
    throw new UsageError(`${name} is not valid JSON: ${(err as Error).message}`);
  }
}

/** The JSON value from the argument, the file or stdin; the fallback when none is given. */
export async function readJsonInput(source: JsonSource): Promise<unknown> {
  if (source.inline !== undefined && source.file !== undefined) {
    throw new UsageError(`give ${source.name} or ${source.fileFlag}, not both`);
  }
  if (source.file !== undefined) {
    const text = source.file === '-' ? await readStdin() : await readFileText(source.file, source.fileFlag);
    return parseJsonText(text, source.file === '-' ? 'stdin' : source.file);
  }
  if (source.inline === undefined) return source.fallback;
  return parseJsonText(source.inline === '-' ? await readStdin() : source.inline, source.inline === '-' ? 'stdin' : source.name);
}

/** True for a JSON object (not an array, not null). */
export function isJsonObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
