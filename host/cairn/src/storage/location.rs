//! A home's location as people may see it. A PostgreSQL home is a URL that can hold a password
//! (in its user information or a query parameter); every log line, error, report and file name
//! that names a home goes through [`shown`], so the password never leaves the process.

use std::path::Path;

/// What a secret becomes.
const HIDDEN: &str = "***";

/// Whether `location` names a PostgreSQL database (`postgres://…`, `postgresql://…`) rather
/// than a directory.
pub fn is_database(location: &Path) -> bool {
    location.to_str().is_some_and(is_url)
}

pub(super) fn is_url(location: &str) -> bool {
    location.starts_with("postgres://") || location.starts_with("postgresql://")
}

/// `location` fit to show: a directory as it is, a database URL with its password and every
/// secret-bearing query parameter replaced by `***`.
pub fn shown(location: &Path) -> String {
    let text = location.to_string_lossy();
    if is_url(&text) {
        redacted(&text)
    } else {
        text.into_owned()
    }
}

/// The URL's parts: scheme, user information (if any), the rest of the authority and path, the
/// query (if any). The user information ends at the *last* `@` before the path: a password
/// holding an unescaped `@` stays whole instead of leaking its tail as a host name.
fn split(url: &str) -> (&str, Option<&str>, &str, Option<&str>) {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let (before_query, query) = match rest.split_once('?') {
        Some((before, query)) => (before, Some(query)),
        None => (rest, None),
    };
    // A `/` may sit inside an unescaped password too, so the last `@` anywhere before the query
    // is where the user information ends (a database name with `@` is rarer than such a password).
    match before_query.rfind('@') {
        Some(at) => (scheme, Some(&before_query[..at]), &before_query[at + 1..], query),
        None => (scheme, None, before_query, query),
    }
}

/// Whether a query parameter carries a secret (`password`, `sslpassword`, anything naming a
/// password, key or token).
fn is_secret_parameter(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    ["pass", "secret", "key", "token"].iter().any(|word| name.contains(word))
}

fn redacted(url: &str) -> String {
    let (scheme, user_info, host_and_path, query) = split(url);
    let mut out = format!("{scheme}://");
    if let Some(user_info) = user_info {
        match user_info.split_once(':') {
            Some((user, _password)) => out.push_str(&format!("{user}:{HIDDEN}@")),
            None => out.push_str(&format!("{user_info}@")),
        }
    }
    out.push_str(host_and_path);
    if let Some(query) = query {
        let parameters: Vec<String> = query
            .split('&')
            .map(|parameter| match parameter.split_once('=') {
                Some((name, _)) if is_secret_parameter(name) => format!("{name}={HIDDEN}"),
                _ => parameter.to_string(),
            })
            .collect();
        out.push('?');
        out.push_str(&parameters.join("&"));
    }
    out
}

/// The URL a PostgreSQL client reads as meant: `@`, `/`, `?` and `#` inside the user
/// information percent-encoded (a password typed as it is, `p@ss`, is then `p%40ss`, where the
/// client would have split at its first `@`).
pub(super) fn for_client(url: &str) -> String {
    let (scheme, Some(user_info), host_and_path, query) = split(url) else { return url.to_string() };
    let encoded = user_info.replace('%', "%25").replace('@', "%40").replace('/', "%2F").replace('#', "%23");
    // `%` that already starts an escape stays one: only bare `%` is encoded.
    let encoded = decode_double_escapes(&encoded);
    let query = query.map(|q| format!("?{q}")).unwrap_or_default();
    format!("{scheme}://{encoded}@{host_and_path}{query}")
}

/// Undoes `%25XX` for `%XX` that was already a valid escape.
fn decode_double_escapes(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < bytes.len() {
        if text[i..].starts_with("%25") && bytes.len() >= i + 5 && bytes[i + 3].is_ascii_hexdigit() && bytes[i + 4].is_ascii_hexdigit() {
            out.push('%');
            i += 3;
        } else {
            out.push(bytes[i] as char);
            i += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_form_of_password_is_hidden() {
        let cases = [
            ("postgres://u:PW@127.0.0.1:5432/db", "postgres://u:***@127.0.0.1:5432/db"),
            ("postgresql://u:p@ss@h/db", "postgresql://u:***@h/db"),
            ("postgres://u:a/b@c@h:5/db?sslmode=disable", "postgres://u:***@h:5/db?sslmode=disable"),
            ("postgres://u:p%40w@h/db", "postgres://u:***@h/db"),
            ("postgres://u@h/db?password=X&sslmode=require", "postgres://u@h/db?password=***&sslmode=require"),
            ("postgres://h/db?user=u&PassWord=X&sslpassword=Y", "postgres://h/db?user=u&PassWord=***&sslpassword=***"),
            ("postgres://u@h/db", "postgres://u@h/db"),
        ];
        for (url, expected) in cases {
            assert_eq!(shown(Path::new(url)), expected, "{url}");
        }
        assert_eq!(shown(Path::new("/home/me/.local/share/cairn")), "/home/me/.local/share/cairn");
        assert!(is_database(Path::new("postgresql://h/db")) && !is_database(Path::new("postgres:/u:PW@h/db")));
    }

    #[test]
    fn an_unescaped_at_in_a_password_reaches_the_client_escaped() {
        assert_eq!(for_client("postgres://u:p@ss@h:5/db?x=1"), "postgres://u:p%40ss@h:5/db?x=1");
        assert_eq!(for_client("postgres://u:p%40ss@h/db"), "postgres://u:p%40ss@h/db", "an escape stays one escape");
        assert_eq!(for_client("postgres://u:100%@h/db"), "postgres://u:100%25@h/db");
        assert_eq!(for_client("postgres://h/db"), "postgres://h/db");
        let config: postgres::Config = for_client("postgres://u:p@ss@h:5/db").parse().unwrap();
        assert_eq!(config.get_password(), Some(&b"p@ss"[..]));
        assert_eq!(format!("{:?}", config.get_hosts()), r#"[Tcp("h")]"#);
    }
}
