/**
 * Import files and folders into a knowledge base (docs/importing.md#the-web-app): chosen with the
 * file pickers or dropped onto the tree, sent as one import job (`POST /api/import-jobs`, each
 * file under its relative path so a folder keeps its tree and links between the files resolve),
 * then followed live (`GET /api/import-jobs/:id` polled: phase, files done, the current file)
 * until the per-file results: created / updated / unchanged / failed, warnings, errors with
 * their codes, links to the new pages.
 *
 * Trap: a dropped folder is read through `webkitGetAsEntry()` (the only way a browser lists a
 * dropped folder's files), whose directory reader answers in chunks: read until an empty chunk.
 */
import { useEffect, useRef, useState } from 'preact/hooks'
import { request, type S } from '../api/client'
import { t } from '../lib/i18n'
import { invalidate } from '../lib/query'
import { paths } from '../lib/router'
import { Dialog, ErrorNote } from './ui'
import { formatBytes } from '../lib/format'

export interface PickedFile {
  path: string // relative path inside what was picked or dropped: `notes/a.md`
  file: File
}

type Progress = { phase: string; done: number; total: number; current: string }
type Job = S['ImportJobOut'] & { progress?: Progress | null }

const POLL_MS = 700

/** The files of a drop, folders walked, each with its path relative to what was dropped. */
export async function droppedFiles(dt: DataTransfer): Promise<PickedFile[]> {
  const entries: FileSystemEntry[] = []
  for (const item of Array.from(dt.items ?? [])) {
    const e = item.kind === 'file' ? item.webkitGetAsEntry?.() : null
    if (e) entries.push(e)
  }
  if (!entries.length) return Array.from(dt.files ?? []).map((file) => ({ path: file.name, file }))
  const out: PickedFile[] = []
  const walk = async (entry: FileSystemEntry, prefix: string): Promise<void> => {
    if (entry.isFile) {
      const file = await new Promise<File>((ok, fail) => (entry as FileSystemFileEntry).file(ok, fail))
      out.push({ path: prefix + entry.name, file })
    } else if (entry.isDirectory) {
      const reader = (entry as FileSystemDirectoryEntry).createReader()
      for (;;) {
        const chunk = await new Promise<FileSystemEntry[]>((ok, fail) => reader.readEntries(ok, fail))
        if (!chunk.length) break
        for (const c of chunk) await walk(c, `${prefix}${entry.name}/`)
      }
    }
  }
  for (const e of entries) await walk(e, '')
  return out
}

function fromInput(list: FileList | null): PickedFile[] {
  return Array.from(list ?? []).map((file) => ({ path: file.webkitRelativePath || file.name, file }))
}

function statusText(status: string): string {
  switch (status) {
    case 'created':
      return t('importCreated')
    case 'updated':
      return t('importUpdated')
    case 'unchanged':
      return t('importUnchanged')
    case 'failed':
      return t('importFailed')
    case 'asset':
      return t('importAsset')
    default:
      return status
  }
}

export function ImportDialog(props: { kbId: string; parentId: string | null; parentTitle?: string; files?: PickedFile[]; onClose: () => void }) {
  const { kbId, parentId } = props
  const [picked, setPicked] = useState<PickedFile[]>(props.files ?? [])
  const [job, setJob] = useState<Job | null>(null)
  const [error, setError] = useState<unknown>(null)
  const [sending, setSending] = useState(false)
  const folderInput = useRef<HTMLInputElement>(null)
  const finished = job?.status === 'succeeded' || job?.status === 'failed'

  // a folder picker is a file input with the (non-standard, universally supported) attribute
  useEffect(() => {
    folderInput.current?.setAttribute('webkitdirectory', '')
  }, [])

  useEffect(() => {
    if (!job || finished) return
    const timer = setTimeout(() => {
      request<Job>('GET', `/api/import-jobs/${job.id}`)
        .then((next) => {
          setJob(next)
          if (next.status === 'succeeded' || next.status === 'failed') invalidate(`tree:${kbId}`)
        })
        .catch(setError)
    }, POLL_MS)
    return () => clearTimeout(timer)
  }, [job])

  function add(more: PickedFile[]) {
    const seen = new Set(picked.map((p) => p.path))
    setPicked([...picked, ...more.filter((p) => !seen.has(p.path))])
  }

  function start() {
    const form = new FormData()
    form.append('knowledge_base_id', kbId)
    if (parentId) form.append('parent_id', parentId)
    for (const p of picked) form.append('file', p.file, p.path)
    setError(null)
    setSending(true)
    request<Job>('POST', '/api/import-jobs', form)
      .then(setJob)
      .catch(setError)
      .finally(() => setSending(false))
  }

  const progress = job?.progress
  const results = job?.files ?? []
  const counts = job?.counts ?? {}
  const into = props.parentTitle ? t('importInto', { title: props.parentTitle }) : t('importIntoRoot')

  return (
    <Dialog title={t('importTitle')} onClose={props.onClose} wide>
      <p class="muted">{into}</p>
      {!job ? (
        <>
          <p>{t('importHelp')}</p>
          <div class="actions import-pick">
            <label class="pick-button">
              {t('importChooseFiles')}
              <input type="file" multiple class="sr-only" aria-label={t('importChooseFiles')} onChange={(e) => add(fromInput((e.target as HTMLInputElement).files))} />
            </label>
            <label class="pick-button">
              {t('importChooseFolder')}
              <input ref={folderInput} type="file" multiple class="sr-only" aria-label={t('importChooseFolder')} onChange={(e) => add(fromInput((e.target as HTMLInputElement).files))} />
            </label>
          </div>
          {picked.length ? (
            <ul class="import-files" aria-label={t('importSelected')}>
              {picked.map((p) => (
                <li key={p.path}>
                  {p.path} <span class="muted">({formatBytes(p.file.size)})</span>
                </li>
              ))}
            </ul>
          ) : null}
        </>
      ) : (
        <div role="status" aria-live="polite" aria-label={t('importProgress')}>
          {!finished ? (
            <p>
              {progress
                ? t(progress.phase === 'write' ? 'importSaving' : 'importConverting', { done: progress.done, total: progress.total, current: progress.current })
                : t('importQueued')}
            </p>
          ) : (
            <p>
              {job.status === 'succeeded' ? t('importDone') : t('importDoneWithFailures')}{' '}
              {t('importCounts', { created: counts.created ?? 0, updated: counts.updated ?? 0, unchanged: counts.unchanged ?? 0, failed: counts.failed ?? 0, warnings: counts.warnings ?? 0 })}
            </p>
          )}
          {progress && !finished ? <progress max={progress.total} value={progress.done} aria-label={t('importProgress')} /> : null}
        </div>
      )}
      {job && finished && job.error && !results.length ? <p class="error" role="alert">{job.error}</p> : null}
      {results.length ? (
        <table class="grid import-results" aria-label={t('importResults')}>
          <thead>
            <tr>
              <th>{t('importFile')}</th>
              <th>{t('importStatus')}</th>
              <th>{t('importNotes')}</th>
            </tr>
          </thead>
          <tbody>
            {results.map((f) => (
              <tr key={f.path} class={f.status === 'failed' ? 'failed' : undefined}>
                <td>{f.document_id && f.type === 'page' && f.status !== 'failed' ? <a href={paths.doc(kbId, f.document_id)}>{f.path}</a> : f.path}</td>
                <td>{statusText(f.status)}</td>
                <td>
                  {f.status === 'failed' ? (
                    <span class="error">
                      {f.code ? <code>{f.code}</code> : null} {f.error}
                    </span>
                  ) : null}
                  {(f.warnings ?? []).length ? (
                    <ul class="warnings">
                      {(f.warnings ?? []).map((w, i) => (
                        <li key={i}>{w}</li>
                      ))}
                    </ul>
                  ) : null}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : null}
      <ErrorNote error={error} />
      <div class="actions">
        <button type="button" onClick={props.onClose}>
          {job ? t('close') : t('cancel')}
        </button>
        {!job ? (
          <button type="button" class="primary" disabled={!picked.length || sending} onClick={start}>
            {picked.length ? t('importStart', { n: picked.length }) : t('importAction')}
          </button>
        ) : null}
      </div>
    </Dialog>
  )
}
