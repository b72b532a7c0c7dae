//! Request parameters as the Java servlets read them: query-string (and, for
//! POST-as-GET, JSON-body) parameters, repeatable, percent-decoded; the two
//! boolean conventions of §4.5; path segments decoded with `+` kept.

use serde_json::Value;

/// Decode `%XX` escapes; `plus_is_space` for query strings (form encoding),
/// not for paths. Malformed escapes are kept literally, as Java's decoder
/// in the servlet container does for paths.
pub fn percent_decode(s: &str, plus_is_space: bool) -> Vec<u8> {
    // `+` is replaced before decoding, so an encoded `%2B` stays a plus.
    let spaced;
    let s = if plus_is_space && s.contains('+') {
        spaced = s.replace('+', " ");
        &spaced
    } else {
        s
    };
    percent_encoding::percent_decode_str(s).collect()
}

/// [`percent_decode`] as text (invalid UTF-8 replaced); valid text is not copied again.
pub fn percent_decode_str(s: &str, plus_is_space: bool) -> String {
    String::from_utf8(percent_decode(s, plus_is_space))
        .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// Ordered, repeatable parameters (names are case-sensitive, as in servlets).
#[derive(Debug, Default, Clone)]
pub struct Params(pub Vec<(String, String)>);

impl Params {
    pub fn from_query(query: Option<&str>) -> Params {
        let Some(q) = query else { return Params::default() };
        Params(
            q.split('&')
                .filter(|kv| !kv.is_empty())
                .map(|kv| {
                    let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
                    (percent_decode_str(k, true), percent_decode_str(v, true))
                })
                .collect(),
        )
    }

    /// POST-as-GET: a JSON object's properties become parameters (arrays repeat).
    pub fn from_json_object(o: &serde_json::Map<String, Value>) -> Params {
        let mut out = Vec::new();
        for (k, v) in o {
            let mut push = |v: &Value| match v {
                Value::String(s) => out.push((k.clone(), s.clone())),
                Value::Null => out.push((k.clone(), String::new())),
                other => out.push((k.clone(), other.to_string())),
            };
            match v {
                Value::Array(items) => items.iter().for_each(&mut push),
                v => push(v),
            }
        }
        Params(out)
    }

    pub fn get(&self, name: &str) -> Option<&str> {
        self.0.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }

    pub fn all<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.0.iter().filter(move |(k, _)| k == name).map(|(_, v)| v.as_str())
    }

    pub fn has(&self, name: &str) -> bool {
        self.get(name).is_some()
    }

    /// §4.5: true when present without value, or `true`/`yes` in any case.
    pub fn flag(&self, name: &str) -> bool {
        self.get(name).is_some_and(|v| v.is_empty() || v.eq_ignore_ascii_case("true") || v.eq_ignore_ascii_case("yes"))
    }

    /// `overwrite` / `mintNewSuffix`: only the literal `true` counts; absent = `default`.
    pub fn strict_flag(&self, name: &str, default: bool) -> bool {
        self.get(name).map_or(default, |v| v.eq_ignore_ascii_case("true"))
    }

    /// Repeated integer parameter (`index=1&index=2`); an unparsable one is an error.
    pub fn ints(&self, name: &str) -> Result<Vec<i32>, String> {
        self.all(name).map(|v| v.trim().parse::<i32>().map_err(|_| format!("Invalid {name} parameter {v:?}"))).collect()
    }

    /// `page` and `pageSize`: both optional, neither negative (§4.5 paging).
    pub fn paging(&self) -> Result<(Option<i64>, Option<i64>), String> {
        let (page, size) = (self.int("page")?, self.int("pageSize")?);
        if page.is_some_and(|p| p < 0) || size.is_some_and(|s| s < 0) {
            return Err("page and pageSize must not be negative".into());
        }
        Ok((page, size))
    }

    pub fn int(&self, name: &str) -> Result<Option<i64>, String> {
        self.get(name)
            .map(|v| v.trim().parse::<i64>().map_err(|_| format!("Invalid {name} parameter {v:?}")))
            .transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decoding_paths_and_queries() {
        assert_eq!(percent_decode("TEST%2Fa+b%20c", false), b"TEST/a+b c");
        assert_eq!(percent_decode("a+b%3d", true), b"a b=");
        assert_eq!(percent_decode("a%2Bb+c", true), b"a+b c");
        assert_eq!(percent_decode("100%", false), b"100%");
        assert_eq!(percent_decode("%zz%4", false), b"%zz%4");
        assert_eq!(percent_decode("%E2%82%AC", false), "€".as_bytes());
    }

    #[test]
    fn flags_and_repeats() {
        let p =
            Params::from_query(Some("index=1&index=2&pretty&auth=YES&publicOnly=no&overwrite=yes&type=URL&type=EMAIL"));
        assert_eq!(p.ints("index").unwrap(), vec![1, 2]);
        assert!(p.flag("pretty") && p.flag("auth") && !p.flag("publicOnly") && !p.flag("missing"));
        assert!(!p.strict_flag("overwrite", true), "only the literal true counts");
        assert!(p.strict_flag("mintNewSuffix", true));
        assert_eq!(p.all("type").collect::<Vec<_>>(), vec!["URL", "EMAIL"]);
        assert!(Params::from_query(Some("index=x")).ints("index").is_err());
    }

    #[test]
    fn json_body_parameters() {
        let v: Value = serde_json::json!({"index": [1, 2], "pretty": true, "type": "URL"});
        let p = Params::from_json_object(v.as_object().unwrap());
        assert_eq!(p.ints("index").unwrap(), vec![1, 2]);
        assert!(p.flag("pretty"));
        assert_eq!(p.get("type"), Some("URL"));
    }
}
