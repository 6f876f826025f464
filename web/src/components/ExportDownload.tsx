/**
 * Export a document, folder or knowledge base as a zip (docs/export.md#api), with progress.
 *
 * The server streams the zip (its length is not known in advance); `X-Export-Bytes` gives the
 * size of the pages and assets before compression, so the status line shows the bytes received
 * next to that estimate. The bytes are collected into a Blob and handed to the browser as a
 * download under the name the server suggests. Trap: a Blob lives in the tab's memory, so an
 * export above `BIG` is handed to the browser's own download instead (it streams to disk and
 * shows its own progress). The size is asked first with `HEAD` (planned, nothing sent, not
 * audited), so one click is one export request and one audit row: asking with the `GET` and
 * cancelling it before navigating was a second, audited export. A refusal (404,
 * EXPORT_TOO_LARGE naming the cap) is shown in the same status line, which stays until closed.
 *
 * The status line is its own element on the page (not part of the caller's render tree), so a
 * menu can start an export and close itself.
 */
import { lang } from '../lib/i18n'
import { formatBytes } from '../lib/format'

const TEXT = {
  en: {
    export: 'Export (.zip)',
    exportKb: 'Export all (.zip)',
    starting: 'Preparing the export…',
    progress: 'Exporting… {got} received (pages and assets: {total})',
    done: 'Exported {name} ({got})',
    failed: 'Export failed: {detail}',
    handedOver: 'Large export ({total}): your browser is downloading it',
    close: 'Close',
  },
  'zh-CN': {
    export: '导出（.zip）',
    exportKb: '全部导出（.zip）',
    starting: '正在准备导出…',
    progress: '正在导出… 已接收 {got}（页面和附件共 {total}）',
    done: '已导出 {name}（{got}）',
    failed: '导出失败：{detail}',
    handedOver: '导出内容较大（{total}）：浏览器正在下载',
    close: '关闭',
  },
}

type Key = keyof (typeof TEXT)['en']

/** Above this (pages and assets), the zip is not collected in memory but downloaded by the browser. */
const BIG = 256 * 1024 * 1024

function tx(key: Key, vars: Record<string, string> = {}): string {
  const table = TEXT[lang() === 'zh-CN' ? 'zh-CN' : 'en']
  return table[key].replace(/\{(\w+)\}/g, (_, k: string) => vars[k] ?? `{${k}}`)
}

export function exportLabel(): string {
  return tx('export')
}

/** The knowledge base's own export (the tree's head). */
export function exportKbLabel(): string {
  return tx('exportKb')
}


/** The file name of a Content-Disposition (RFC 6266 `filename*` first). */
function filenameOf(disposition: string | null): string | null {
  if (!disposition) return null
  const star = /filename\*=UTF-8''([^;]+)/i.exec(disposition)
  if (star) {
    try {
      return decodeURIComponent(star[1])
    } catch {
      /* fall through to the plain name */
    }
  }
  const plain = /filename="([^"]+)"/i.exec(disposition)
  return plain ? plain[1] : null
}

function statusBox(): { box: HTMLDivElement; show: (text: string) => void } {
  const box = document.createElement('div')
  box.className = 'export-progress'
  box.setAttribute('role', 'status')
  box.setAttribute('aria-live', 'polite')
  Object.assign(box.style, {
    position: 'fixed',
    right: '1rem',
    bottom: '1rem',
    zIndex: '1000',
    padding: '0.6rem 0.9rem',
    background: 'var(--bg, #fff)',
    border: '1px solid var(--border, #ccc)',
    borderRadius: '6px',
    boxShadow: '0 2px 8px rgba(0,0,0,.15)',
    maxWidth: '28rem',
  })
  const text = document.createElement('span')
  box.append(text)
  document.body.append(box)
  return { box, show: (t: string) => (text.textContent = t) }
}

/** GET `url` (an export route), show progress, save the zip. */
export async function exportZip(url: string, fallbackName = 'export.zip'): Promise<void> {
  const { box, show } = statusBox()
  show(tx('starting'))
  try {
    // a failed HEAD (a refusal, an old server) falls through to the GET, which says why
    const head = await fetch(url, { method: 'HEAD', credentials: 'same-origin' }).catch(() => null)
    const planned = head?.ok ? Number(head.headers.get('X-Export-Bytes') ?? 0) : 0
    if (planned > BIG) {
      // too big to collect in this tab: the browser's own download writes it to disk as it
      // arrives (and shows its progress)
      const a = document.createElement('a')
      a.href = url
      a.download = filenameOf(head?.headers.get('Content-Disposition') ?? null) ?? fallbackName
      document.body.append(a)
      a.click()
      a.remove()
      box.dataset.state = 'done'
      show(tx('handedOver', { total: formatBytes(planned) }))
      setTimeout(() => box.remove(), 6000)
      return
    }
    const r = await fetch(url, { credentials: 'same-origin', headers: { Accept: 'application/zip, application/json' } })
    if (!r.ok || !r.body) {
      let detail = `HTTP ${r.status}`
      try {
        const body = (await r.json()) as { error?: string; detail?: string }
        detail = body.detail || body.error || detail
      } catch {
        /* not JSON: keep the status */
      }
      throw new Error(detail)
    }
    const total = Number(r.headers.get('X-Export-Bytes') ?? 0)
    const reader = r.body.getReader()
    const parts: BlobPart[] = []
    let got = 0
    for (;;) {
      const { done, value } = await reader.read()
      if (done) break
      parts.push(value)
      got += value.length
      box.dataset.received = String(got)
      show(tx('progress', { got: formatBytes(got), total: formatBytes(total) }))
    }
    const name = filenameOf(r.headers.get('Content-Disposition')) ?? fallbackName
    const a = document.createElement('a')
    a.href = URL.createObjectURL(new Blob(parts, { type: 'application/zip' }))
    a.download = name
    document.body.append(a)
    a.click()
    a.remove()
    setTimeout(() => URL.revokeObjectURL(a.href), 60_000)
    box.dataset.state = 'done'
    show(tx('done', { name, got: formatBytes(got) }))
    setTimeout(() => box.remove(), 6000)
  } catch (e) {
    box.dataset.state = 'failed'
    show(tx('failed', { detail: e instanceof Error ? e.message : String(e) }))
    const close = document.createElement('button')
    close.type = 'button'
    close.textContent = tx('close')
    close.style.marginLeft = '0.5rem'
    close.onclick = () => box.remove()
    box.append(close)
  }
}
