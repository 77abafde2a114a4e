// The web page's first paint from transcribe-server, against a one-line HTML page served by Node on the
// same machine in the same browser (the browser's own floor), loads interleaved, fresh contexts.
// usage: node bench/web_first_paint.mjs SERVER MODEL.gguf [LOADS=15]   (run from a folder with
// playwright-core installed: build/web-client after the web_page test)
import { spawn } from 'node:child_process';
import http from 'node:http';
import { createRequire } from 'node:module';

const [SERVER, MODEL, LOADS = '15'] = process.argv.slice(2);
const { chromium } = createRequire(process.cwd() + '/')('playwright-core');

const server = spawn(SERVER, ['-m', MODEL, '--port', '0', '--threads', '2'], { stdio: ['ignore', 'pipe', 'ignore'] });
const base = await new Promise((resolve) => {
  let out = '';
  server.stdout.on('data', (d) => {
    out += d;
    const m = out.match(/listening on (http:\/\/127\.0\.0\.1:\d+)/);
    if (m) resolve(m[1]);
  });
});
const floor = http.createServer((req, res) => {
  res.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8' });
  res.end('<!doctype html><title>floor</title><p>hello</p>');
});
await new Promise((resolve) => floor.listen(0, '127.0.0.1', resolve));
const floorUrl = `http://127.0.0.1:${floor.address().port}/`;

const browser = await chromium.launch({ executablePath: process.env.CHROMIUM || '/usr/bin/chromium' });
async function firstPaint(url) {
  const context = await browser.newContext();
  const page = await context.newPage();
  await page.goto(url, { waitUntil: 'load' });
  const fcp = await page.evaluate(() => new Promise((resolve) => {
    const seen = () => performance.getEntriesByName('first-contentful-paint')[0];
    if (seen()) return resolve(seen().startTime);
    new PerformanceObserver(() => seen() && resolve(seen().startTime)).observe({ type: 'paint', buffered: true });
  }));
  await context.close();
  return fcp;
}
const ours = [], floors = [];
await firstPaint(base + '/'); // warm the browser once
for (let i = 0; i < Number(LOADS); ++i) {
  ours.push(await firstPaint(base + '/'));
  floors.push(await firstPaint(floorUrl));
}
const median = (a) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)];
console.log(`first contentful paint, median of ${LOADS} (ms): page ${median(ours).toFixed(0)}, ` +
  `one-line page ${median(floors).toFixed(0)}, ratio ${(median(ours) / median(floors)).toFixed(2)}; ` +
  `page max ${Math.max(...ours).toFixed(0)}`);
await browser.close();
floor.close();
server.kill('SIGTERM');
