/** The samples of one metric in Prometheus text: `name{labels} value` lines, by their label part. */
export function samples(text: string, name: string): Map<string, number> {
  const found = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    const space = line.lastIndexOf(' ');
    found.set(line.slice(name.length, space), Number(line.slice(space + 1)));
  }
  return found;
}

/** A metrics listener's text, fetched as Prometheus scrapes it. */
export async function scrapeUrl(url: string): Promise<string> {
  const response = await fetch(url);
  if (response.status !== 200) throw new Error(`GET ${url} answered ${response.status}`);
  return response.text();
}
