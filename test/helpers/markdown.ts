// Reading the repository's Markdown as GitHub renders it: its fenced code blocks, its links and the
// anchors its headings get. The docs tests check snippets and links with these.
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

export const ROOT = path.join(__dirname, '..', '..');

/** README.md, CHANGELOG.md, every docs/*.md and the client package's README, relative to the root. */
export function listMarkdownFiles(): string[] {
  const docs = readdirSync(path.join(ROOT, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .sort()
    .map((f) => `docs/${f}`);
  return ['README.md', 'CHANGELOG.md', ...docs, 'packages/client/README.md'];
}

export function readMarkdown(file: string): string {
  return readFileSync(path.join(ROOT, file), 'utf8');
}

/** The text with fenced code blocks blanked out (lines kept, so positions still mean something). */
function withoutCodeBlocks(text: string): string[] {
  let fenced = false;
  return text.split('\n').map((line) => {
    if (/^\s*(```|~~~)/.test(line)) {
      fenced = !fenced;
      return '';
    }
    return fenced ? '' : line;
  });
}

/** GitHub's anchor for a heading: inline markup dropped, lower case, punctuation gone, spaces to hyphens. */
export function slugifyHeading(heading: string): string {
  return heading
    .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '')
    .replace(/ /g, '-');
}

/** Every anchor a file offers: its headings' slugs (repeats numbered -1, -2, … as GitHub does) and HTML ids. */
export function listAnchors(text: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  for (const line of withoutCodeBlocks(text)) {
    const heading = /^#{1,6}\s+(.+?)\s*#*\s*$/.exec(line);
    if (heading) {
      const slug = slugifyHeading(heading[1]);
      const count = seen.get(slug) ?? 0;
      seen.set(slug, count + 1);
      anchors.add(count === 0 ? slug : `${slug}-${count}`);
    }
    for (const id of line.matchAll(/<a\s+(?:id|name)="([^"]+)"/g)) anchors.add(id[1]);
  }
  return anchors;
}

export interface MarkdownLink {
  line: number;
  target: string;
}

/** Inline links and images, and reference definitions, outside code blocks and code spans. */
export function listLinks(text: string): MarkdownLink[] {
  const links: MarkdownLink[] = [];
  withoutCodeBlocks(text).forEach((raw, index) => {
    const line = raw.replace(/`[^`]*`/g, '``');
    for (const m of line.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) links.push({ line: index + 1, target: m[1] });
    const definition = /^\s{0,3}\[[^\]]+\]:\s+<?(\S+?)>?(\s|$)/.exec(line);
    if (definition) links.push({ line: index + 1, target: definition[1] });
  });
  return links;
}

/** A link that leaves the repository (a scheme, or protocol-relative): not checked here. */
export function isExternal(target: string): boolean {
  return /^[a-z][a-z0-9+.-]*:/i.test(target) || target.startsWith('//');
}

export interface Snippet {
  file: string;
  source: string;
  block: string;
}

/**
 * The code blocks marked `<!-- snippet: PATH -->` (on the line before the fence): each must be the
 * file at PATH (from the repository root), verbatim.
 */
const SNIPPET_PATTERN = /^<!-- snippet: (\S+) -->\n```\w*\n([\s\S]*?)^```$/gm;

export function listSnippets(file: string): Snippet[] {
  const snippets: Snippet[] = [];
  for (const m of readMarkdown(file).matchAll(SNIPPET_PATTERN)) {
    snippets.push({ file, source: m[1], block: m[2] });
  }
  return snippets;
}
