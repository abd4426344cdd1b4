// Every relative link in the README, the changelog and the guides resolves: the file exists, and an
// `#anchor` names a heading of the target as GitHub renders it. A moved section or a renamed heading
// fails here instead of leaving readers at the top of a page.
import { existsSync, statSync } from 'node:fs';
import path from 'node:path';
import { isExternal, listAnchors, listLinks, listMarkdownFiles, readMarkdown, ROOT, slugifyHeading } from '../helpers/markdown';

function findBrokenLinks(file: string): string[] {
  const broken: string[] = [];
  for (const { line, target } of listLinks(readMarkdown(file))) {
    if (isExternal(target)) continue;
    const [rawPath, anchor] = target.split('#', 2) as [string, string | undefined];
    const resolved = rawPath === '' ? file : path.posix.normalize(path.posix.join(path.posix.dirname(file), decodeURI(rawPath)));
    const where = `${file}:${line} → ${target}`;
    if (resolved.startsWith('..') || !existsSync(path.join(ROOT, resolved))) {
      broken.push(`${where}: ${resolved} does not exist`);
      continue;
    }
    if (anchor === undefined || anchor === '') continue;
    if (!resolved.endsWith('.md') || statSync(path.join(ROOT, resolved)).isDirectory()) {
      broken.push(`${where}: an anchor into a file that is not Markdown`);
      continue;
    }
    if (!listAnchors(readMarkdown(resolved)).has(anchor)) broken.push(`${where}: ${resolved} has no heading with the anchor #${anchor}`);
  }
  return broken;
}

describe('links in the documentation', () => {
  test('GitHub-style anchors: markup and punctuation dropped, repeats numbered', () => {
    expect(slugifyHeading('Tracing (OpenTelemetry)')).toBe('tracing-opentelemetry');
    expect(slugifyHeading('Many processes on one database (`make scale`)')).toBe('many-processes-on-one-database-make-scale');
    expect(slugifyHeading('2026-11-28 22:34, S4 only, commit fb90856')).toBe('2026-11-28-2234-s4-only-commit-fb90856');
    expect(slugifyHeading('Engine runs and before/after comparisons')).toBe('engine-runs-and-beforeafter-comparisons');
    expect(slugifyHeading('4.1 POST /api/v1/executions — schedule an execution')).toBe('41-post-apiv1executions--schedule-an-execution');
    expect([...listAnchors('# A\n## B\n```\n# not a heading\n```\n## B\n')]).toEqual(['a', 'b', 'b-1']);
  });

  test('the checker finds a missing file and a missing anchor', () => {
    const links = listLinks('See [x](docs/nope.md), [y](#nowhere), `[z](#in-code)` and\n```\n[w](#in-block)\n```\n[d]: docs/api.md#errors\n');
    expect(links.map((l) => l.target)).toEqual(['docs/nope.md', '#nowhere', 'docs/api.md#errors']);
  });

  test.each(listMarkdownFiles())('%s: every relative link and anchor resolves', (file) => {
    expect(findBrokenLinks(file)).toEqual([]);
  });
});

/** Markdown file names a document mentions in its text (not only in links) that exist nowhere in the repository. */
function findMissingMentions(file: string, text = readMarkdown(file)): string[] {
  const missing = new Set<string>();
  for (const [name] of text.matchAll(/\b[A-Za-z][\w-]*\.md\b/g)) {
    const candidates = [path.posix.join(path.posix.dirname(file), name), name, path.posix.join('docs', name)];
    if (!candidates.some((c) => existsSync(path.join(ROOT, c)))) missing.add(name);
  }
  return [...missing];
}

describe('documents the documentation names', () => {
  test('the checker finds a mention of a file that is not there', () => {
    expect(findMissingMentions('docs/spec.md', 'Decided in PRODUCT.md, see api.md and README.md.')).toEqual(['PRODUCT.md']);
  });

  test.each(listMarkdownFiles())('%s: every *.md it mentions exists', (file) => {
    expect(findMissingMentions(file)).toEqual([]);
  });
});
