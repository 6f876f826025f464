/**
 * Form pieces the settings, account and admin pages share (docs/web.md). `Choice` is the one
 * `<select>` over a fixed list of values whose labels come from the message table: a role, a
 * visibility, a status filter. It keeps the value typed as the list's union, so a page never
 * casts `e.target.value` itself.
 */
import type { JSX } from 'preact'

export function Choice<V extends string>(props: {
  options: readonly V[]
  value: V
  onChange: (v: V) => void
  /** the visible text of an option (from the message table) */
  label: (v: V) => string
  id?: string
  /** for a select without a visible `<label for>` */
  ariaLabel?: string
  required?: boolean
}): JSX.Element {
  return (
    <select
      id={props.id}
      aria-label={props.ariaLabel}
      required={props.required}
      value={props.value}
      onChange={(e) => props.onChange((e.target as HTMLSelectElement).value as V)}
    >
      {props.options.map((v) => (
        <option key={v} value={v}>
          {props.label(v)}
        </option>
      ))}
    </select>
  )
}

/** Every IANA zone this browser knows (the time-zone field's suggestions). */
function zoneNames(): string[] {
  const intl = Intl as typeof Intl & { supportedValuesOf?: (key: 'timeZone') => string[] }
  try {
    return intl.supportedValuesOf?.('timeZone') ?? []
  } catch {
    return []
  }
}

function browserZone(): string {
  return Intl.DateTimeFormat().resolvedOptions().timeZone || ''
}

/**
 * The time-zone field the profile and the admin console's tenant default share: a free input
 * (empty = UTC) with the browser's IANA names as suggestions. An unknown zone is the server's
 * 422 VALIDATION_ERROR naming the field; the page passes its detail as `error`, shown under the
 * input (aria-invalid) in place of the help text.
 */
export function TimeZoneField(props: {
  id: string
  /** the input's name; the datalist (`<name>s`), help and error ids derive from it */
  name: string
  label: string
  help: string
  value: string
  onInput: (v: string) => void
  error?: string | null
  /** the "use this browser's time zone" button's text, given the zone */
  useBrowser: (zone: string) => string
}): JSX.Element {
  const here = browserZone()
  const { id, name, error } = props
  return (
    <div class="field">
      <label for={id}>{props.label}</label>
      <input
        id={id}
        name={name}
        list={`${name}s`}
        value={props.value}
        placeholder="UTC"
        autoComplete="off"
        aria-invalid={error != null ? true : undefined}
        aria-describedby={error != null ? `${name}-error` : `${name}-help`}
        onInput={(e) => props.onInput((e.target as HTMLInputElement).value)}
      />
      <datalist id={`${name}s`}>
        {zoneNames().map((z) => (
          <option key={z} value={z} />
        ))}
      </datalist>
      {error != null ? (
        <p id={`${name}-error`} class="error" role="alert">
          {error}
        </p>
      ) : (
        <p id={`${name}-help`} class="muted">
          {props.help}
        </p>
      )}
      {here && here !== props.value ? (
        <button type="button" class="link-button" onClick={() => props.onInput(here)}>
          {props.useBrowser(here)}
        </button>
      ) : null}
    </div>
  )
}
