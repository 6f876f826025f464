import { JSDOM } from 'jsdom';
const dom = new JSDOM('<!doctype html><html><body><div id="app"></div></body></html>', { url: 'http://localhost/', pretendToBeVisual: true });
const w = dom.window;
for (const k of Object.getOwnPropertyNames(w)) {
  if (k in globalThis) continue;
  try { globalThis[k] = w[k]; } catch {}
}
globalThis.window = w; globalThis.document = w.document;
try { globalThis.navigator = w.navigator; } catch {}
globalThis.addEventListener = w.addEventListener.bind(w);
globalThis.removeEventListener = w.removeEventListener.bind(w);
globalThis.dispatchEvent = w.dispatchEvent.bind(w);
globalThis.Event = w.Event; globalThis.CustomEvent = w.CustomEvent;
class Obs { observe(){} unobserve(){} disconnect(){} takeRecords(){return []} }
globalThis.IntersectionObserver = w.IntersectionObserver = Obs;
globalThis.ResizeObserver = w.ResizeObserver = Obs;
w.matchMedia = globalThis.matchMedia = () => ({ matches: false, addListener(){}, removeListener(){}, addEventListener(){}, removeEventListener(){} });
w.HTMLElement.prototype.scrollIntoView = function(){};
if (!w.document.createRange().getClientRects) {}
w.Range.prototype.getBoundingClientRect = () => ({x:0,y:0,width:0,height:0,top:0,left:0,right:0,bottom:0});
w.Range.prototype.getClientRects = () => ({ length: 0, item: () => null, [Symbol.iterator]: function*(){} });
w.Element.prototype.getClientRects = function(){ return { length: 0, item: () => null, [Symbol.iterator]: function*(){} }; };

const { Crepe } = await import('@milkdown/crepe');
const { replaceAll } = await import('@milkdown/kit/utils');
const crepe = new Crepe({ root: w.document.getElementById('app'), defaultValue: '' });
await crepe.create();
const rl = (await import('node:readline')).createInterface({ input: process.stdin });
for await (const line of rl) {
  if (!line.trim()) continue;
  const md = JSON.parse(line);
  let out;
  try { crepe.editor.action(replaceAll(md)); out = { ok: crepe.getMarkdown() }; }
  catch (e) { out = { err: String(e && e.stack || e) }; }
  process.stdout.write(JSON.stringify(out) + '\n');
}
