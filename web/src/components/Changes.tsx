/**
 * What changed between two texts of a page, line by line, with the changed words marked inside a
 * changed line (docs/web.md#version-history).
 *
 * Why words too: a Markdown paragraph is one line, so a one-word edit in it shows as the whole
 * paragraph removed and added again; the marked words are what the reader looks for. Why the
 * bounds: the editor saves after every pause, so a history holds many versions, and comparing two
 * of them must stay instant in the browser: the line diff gives up past MAX_EDITS changed lines
 * or MAX_MS of work (the dialog then says so and shows the full text), and word marks are left out of long lines.
 */
import { diffLines, diffWordsWithSpace } from 'diff'
import { useMemo } from 'preact/hooks'
import { t } from '../lib/i18n'

/** Unchanged lines kept around each change; longer unchanged runs fold into one "n unchanged lines" row. */
const CONTEXT = 3
/** Past this many changed lines the comparison is not worth reading line by line (and costs time). */
const MAX_EDITS = 5000
/** Nor past this much work (ms) on the browser's main thread: 2,000 changes in 20,000 lines take 2 s. */
const MAX_MS = 1000
/** Word marks only in lines up to this length (the word diff is quadratic in the worst case). */
const MAX_WORD_LINE = 4000

type Part = { text: string; changed: boolean }
export type Row =
  | { kind: 'same' | 'add' | 'del'; parts: Part[]; oldNo: number | null; newNo: number | null }
  | { kind: 'fold'; count: number }

export type LineChanges = { rows: Row[]; added: number; removed: number }

function splitLines(value: string): string[] {
  const lines = value.split('\n')
  if (lines[lines.length - 1] === '') lines.pop() // the newline ends the last line, it does not start one
  return lines
}

/** Mark the words that differ between a removed line and the added line that replaced it. */
function markWords(before: string, after: string): [Part[], Part[]] {
  if (before.length > MAX_WORD_LINE || after.length > MAX_WORD_LINE) {
    return [[{ text: before, changed: false }], [{ text: after, changed: false }]]
  }
  const old: Part[] = []
  const neu: Part[] = []
  for (const c of diffWordsWithSpace(before, after)) {
    if (!c.added) old.push({ text: c.value, changed: c.removed })
    if (!c.removed) neu.push({ text: c.value, changed: c.added })
  }
  return [old, neu]
}

/**
 * The rows that show how `after` differs from `before`: changed lines, CONTEXT unchanged lines
 * around them, and folds; `null` when there are too many changes to show line by line.
 */
export function lineChanges(before: string, after: string): LineChanges | null {
  const changes = diffLines(before, after, { maxEditLength: MAX_EDITS, timeout: MAX_MS })
  if (changes === undefined) return null
  const all: Extract<Row, { parts: Part[] }>[] = []
  let oldNo = 0
  let newNo = 0
  let added = 0
  let removed = 0
  for (let i = 0; i < changes.length; i++) {
    const c = changes[i]
    const lines = splitLines(c.value)
    if (c.removed) {
      const next = changes[i + 1]
      const replacement = next?.added ? splitLines(next.value) : []
      const pairs = Math.min(lines.length, replacement.length)
      const dels: typeof all = []
      const adds: typeof all = []
      lines.forEach((text, k) => {
        const [o, n] = k < pairs ? markWords(text, replacement[k]) : [[{ text, changed: false }], []]
        dels.push({ kind: 'del', parts: o, oldNo: ++oldNo, newNo: null })
        if (k < pairs) adds.push({ kind: 'add', parts: n, oldNo: null, newNo: ++newNo })
      })
      for (const text of replacement.slice(pairs)) adds.push({ kind: 'add', parts: [{ text, changed: false }], oldNo: null, newNo: ++newNo })
      all.push(...dels, ...adds)
      removed += lines.length
      added += replacement.length
      if (next?.added) i++
    } else if (c.added) {
      for (const text of lines) all.push({ kind: 'add', parts: [{ text, changed: false }], oldNo: null, newNo: ++newNo })
      added += lines.length
    } else {
      for (const text of lines) all.push({ kind: 'same', parts: [{ text, changed: false }], oldNo: ++oldNo, newNo: ++newNo })
    }
  }
  // keep CONTEXT unchanged lines on each side of a change, fold the rest
  const keep = all.map((r) => r.kind !== 'same')
  all.forEach((r, k) => {
    if (r.kind === 'same') return
    for (let j = Math.max(0, k - CONTEXT); j <= Math.min(all.length - 1, k + CONTEXT); j++) keep[j] = true
  })
  const rows: Row[] = []
  let folded = 0
  all.forEach((r, k) => {
    if (keep[k]) {
      if (folded) rows.push({ kind: 'fold', count: folded })
      folded = 0
      rows.push(r)
    } else folded++
  })
  if (folded && rows.length) rows.push({ kind: 'fold', count: folded })
  return { rows, added, removed }
}

const SIGN = { same: ' ', add: '+', del: '−' } as const

/**
 * The changes from `before` to `after` (titles and bodies), labelled for a screen reader: each
 * changed line says whether it was added or removed, and the summary counts them.
 */
export function Changes(props: { label: string; before: { title: string; markdown: string }; after: { title: string; markdown: string } }) {
  const result = useMemo(() => lineChanges(props.before.markdown, props.after.markdown), [props.before.markdown, props.after.markdown])
  const titleChanged = props.before.title !== props.after.title
  return (
    <section class="changes" aria-label={props.label}>
      {titleChanged ? (
        <p class="title-change">
          {t('changesTitle')} <del>{props.before.title}</del> → <ins>{props.after.title}</ins>
        </p>
      ) : null}
      {result === null ? (
        <>
          <p class="muted">{t('changesTooMany')}</p>
          <pre>{props.after.markdown}</pre>
        </>
      ) : result.added === 0 && result.removed === 0 ? (
        titleChanged ? null : <p class="muted">{t('changesNone')}</p>
      ) : (
        <>
          <p class="muted">{t('changesSummary', { added: result.added, removed: result.removed })}</p>
          <table class="diff">
            <tbody>
              {result.rows.map((r, k) =>
                r.kind === 'fold' ? (
                  <tr key={k} class="fold">
                    <td colSpan={4}>{t('changesFolded', { n: r.count })}</td>
                  </tr>
                ) : (
                  <tr key={k} class={r.kind}>
                    <td class="no" aria-hidden="true">
                      {r.oldNo ?? ''}
                    </td>
                    <td class="no" aria-hidden="true">
                      {r.newNo ?? ''}
                    </td>
                    <td class="sign" aria-hidden="true">
                      {SIGN[r.kind]}
                    </td>
                    <td class="line">
                      {r.kind === 'same' ? null : <span class="sr-only">{t(r.kind === 'add' ? 'changesAdded' : 'changesRemoved')} </span>}
                      {r.parts.map((p, j) => (p.changed ? <mark key={j}>{p.text}</mark> : p.text))}
                    </td>
                  </tr>
                ),
              )}
            </tbody>
          </table>
        </>
      )}
    </section>
  )
}
