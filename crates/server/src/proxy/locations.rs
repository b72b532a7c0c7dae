//! Choosing where a handle redirects (§2.5): the legacy rule (the first `URL`
//! value) and the 10320/loc selection — `chooseby` methods `locatt`,
//! `address`, `country` (only with an explicit `country=`: there is no GeoIP
//! data here), `score`, `weighted` — with `href_template`, `http_sc` and the
//! `<locations>` listing of `action=showurls`.

use super::escape::{encode, escape};
use handled_proto::value::{types, HandleValue};
use std::net::IpAddr;

pub(super) const LOC_TYPE: &[u8] = b"10320/loc";
/// Locations considered per handle (a value holds at most a few MB of XML).
const MAX_LOCATIONS: usize = 1000;
const DEFAULT_CHOOSEBY: &str = "locatt,address,country,score,weighted";

/// One `<location>`: its attributes in document order.
#[derive(Debug, Clone)]
pub(super) struct Location {
    pub attrs: Vec<(String, String)>,
    /// A plain URL value added to the candidates ("legacy" mode).
    pub legacy: bool,
}

impl Location {
    pub fn get(&self, name: &str) -> Option<&str> {
        self.attrs.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }

    fn weight(&self) -> f64 {
        self.get("weight").and_then(|w| w.trim().parse::<f64>().ok()).filter(|w| w.is_finite()).unwrap_or(1.0).max(0.0)
    }

    fn score(&self) -> f64 {
        self.get("score").and_then(|s| s.trim().parse::<f64>().ok()).filter(|s| s.is_finite()).unwrap_or(f64::MIN)
    }

    /// Where it points: `href`, else `href_template` with `{hdl}` (one
    /// URL-encoded component) and `{hdl:path}` (slashes kept) filled in.
    pub fn target(&self, handle: &str) -> Option<String> {
        if let Some(h) = self.get("href").filter(|h| !h.is_empty()) {
            return Some(h.to_string());
        }
        let template = self.get("href_template").filter(|t| !t.is_empty())?;
        Some(template.replace("{hdl:path}", &encode(handle, b"/")).replace("{hdl}", &encode(handle, b"")))
    }

    /// `http_sc`: 301, 302, 303, 307 or 308; anything else is 302.
    pub fn status(&self) -> u16 {
        let sc = self.get("http_sc").and_then(|s| s.trim().parse::<u16>().ok());
        sc.filter(|sc| matches!(sc, 301 | 302 | 303 | 307 | 308)).unwrap_or(302)
    }

    /// Does attribute `key` hold `want`? Lists (`http_role="conneg browser"`)
    /// match any member; media types ignore parameters; case is ignored.
    fn matches(&self, key: &str, want: &str) -> bool {
        let Some(have) = self.get(key) else { return false };
        have.split([' ', ',']).filter(|m| !m.is_empty()).any(|m| {
            let m = m.split(';').next().unwrap_or(m).trim();
            m.eq_ignore_ascii_case(want)
        })
    }
}

/// The candidates of a handle with 10320/loc values; None without any.
#[derive(Debug, Default)]
pub(super) struct Locations {
    pub list: Vec<Location>,
    chooseby: Vec<String>,
}

impl Locations {
    pub fn from_values(values: &[HandleValue]) -> Option<Locations> {
        let mut out = Locations::default();
        let mut legacy = true;
        let mut seen = false;
        for v in values.iter().filter(|v| v.value_type.eq_ignore_ascii_case(LOC_TYPE)) {
            seen = true;
            let Ok(text) = std::str::from_utf8(&v.data) else { continue };
            let Ok(doc) = crate::xml::parse(text) else { continue };
            let root = doc.root_element();
            if !root.has_tag_name("locations") {
                continue;
            }
            if out.chooseby.is_empty() {
                let by = root.attribute("choose_by").or(root.attribute("chooseby")).unwrap_or(DEFAULT_CHOOSEBY);
                out.chooseby = by.split(',').map(|m| m.trim().to_ascii_lowercase()).collect();
            }
            legacy &= root.attribute("no_legacy").is_none_or(|v| v.eq_ignore_ascii_case("false"));
            for loc in root.children().filter(|n| n.has_tag_name("location")).take(MAX_LOCATIONS) {
                // Attributes go by local name: of two with one name in different
                // namespaces the first counts (as `get` reads), and the listing
                // (`to_xml`) must not write a name twice.
                let mut attrs: Vec<(String, String)> = Vec::new();
                for a in loc.attributes() {
                    if !attrs.iter().any(|(k, _)| k == a.name()) {
                        attrs.push((a.name().to_string(), a.value().to_string()));
                    }
                }
                out.list.push(Location { attrs, legacy: false });
            }
        }
        if !seen {
            return None;
        }
        if legacy {
            // Plain URL values join with weight 0: chosen only by a filter, never at random.
            let urls = values.iter().filter(|v| is_url(v)).filter_map(|v| std::str::from_utf8(&v.data).ok());
            let mut legacy: Vec<Location> = urls
                .map(|u| Location {
                    attrs: vec![("href".into(), u.to_string()), ("weight".into(), "0".into())],
                    legacy: true,
                })
                .collect();
            legacy.append(&mut out.list);
            out.list = legacy;
        }
        out.list.truncate(MAX_LOCATIONS);
        Some(out)
    }

    /// `action=showurls`: the 10320/loc candidates, or else the URL values (weight 1).
    pub fn listing(values: &[HandleValue]) -> Locations {
        Locations::from_values(values).unwrap_or_else(|| Locations {
            list: values
                .iter()
                .filter(|v| is_url(v))
                .map(|v| Location {
                    attrs: vec![
                        ("href".into(), String::from_utf8_lossy(&v.data).into_owned()),
                        ("weight".into(), "1".into()),
                    ],
                    legacy: true,
                })
                .take(MAX_LOCATIONS)
                .collect(),
            chooseby: Vec::new(),
        })
    }

    /// Does any location serve `ctype`/`media-type` `mime`?
    pub fn offers(&self, mime: &str) -> bool {
        self.list.iter().any(|l| l.matches("ctype", mime) || l.matches("media-type", mime))
    }

    /// Apply the `chooseby` methods in turn; a method that would leave nothing
    /// is skipped; one location left is the answer; weighted random at the end.
    pub fn choose(&self, ctx: &Selection<'_>, random: f64) -> Option<&Location> {
        let mut left: Vec<&Location> = self.list.iter().collect();
        for method in &self.chooseby {
            if left.len() <= 1 {
                break;
            }
            let kept: Vec<&Location> = match method.as_str() {
                "locatt" => {
                    for (k, v) in ctx.locatt {
                        let kept: Vec<&Location> = left.iter().copied().filter(|l| l.matches(k, v)).collect();
                        if !kept.is_empty() {
                            left = kept;
                        }
                    }
                    continue;
                }
                "address" => {
                    left.iter().copied().filter(|l| l.get("addresses").is_some_and(|a| in_any(ctx.ip, a))).collect()
                }
                "country" => match ctx.country {
                    Some(c) => {
                        let same: Vec<&Location> = left.iter().copied().filter(|l| l.matches("country", c)).collect();
                        if same.is_empty() {
                            left.iter().copied().filter(|l| l.get("country").is_none()).collect()
                        } else {
                            same
                        }
                    }
                    None => continue,
                },
                "score" => {
                    let best = left.iter().map(|l| l.score()).fold(f64::MIN, f64::max);
                    left.iter().copied().filter(|l| l.score() == best).collect()
                }
                "weighted" => weighted(&left, random).into_iter().collect(),
                _ => continue,
            };
            if !kept.is_empty() {
                left = kept;
            }
        }
        match left.len() {
            0 => None,
            1 => left.pop(),
            _ => weighted(&left, random),
        }
    }

    /// `action=showurls`: the candidates as `<locations>` XML.
    pub fn to_xml(&self) -> String {
        let mut out = String::from("<locations>\n");
        for l in &self.list {
            out.push_str("<location");
            if l.legacy {
                out.push_str(" mode=\"legacy\"");
            }
            for (k, v) in &l.attrs {
                out.push_str(&format!(" {}=\"{}\"", escape(k), escape(v)));
            }
            out.push_str("/>\n");
        }
        out.push_str("</locations>\n");
        out
    }
}

/// What the client brings to the selection.
pub(super) struct Selection<'a> {
    pub locatt: &'a [(String, String)],
    pub ip: IpAddr,
    pub country: Option<&'a str>,
}

/// Pick by weight with `random` in [0, 1); weight 0 is never picked.
fn weighted<'a>(from: &[&'a Location], random: f64) -> Option<&'a Location> {
    let total: f64 = from.iter().map(|l| l.weight()).sum();
    if total <= 0.0 {
        return None;
    }
    let mut point = random * total;
    for l in from.iter().filter(|l| l.weight() > 0.0) {
        if point < l.weight() {
            return Some(l);
        }
        point -= l.weight();
    }
    from.iter().rev().find(|l| l.weight() > 0.0).copied()
}

/// Is `ip` in one of the CIDR blocks (or addresses) of a space/comma list?
fn in_any(ip: IpAddr, list: &str) -> bool {
    list.split([' ', ',']).filter(|b| !b.is_empty()).any(|block| {
        let (addr, bits) = block.split_once('/').unwrap_or((block, ""));
        let Ok(net) = addr.trim().parse::<IpAddr>() else { return false };
        let (ip, net, width) = match (ip, net) {
            (IpAddr::V4(a), IpAddr::V4(n)) => (u128::from(u32::from(a)), u128::from(u32::from(n)), 32),
            (IpAddr::V6(a), IpAddr::V6(n)) => (u128::from(a), u128::from(n), 128),
            (IpAddr::V6(a), IpAddr::V4(n)) => match a.to_ipv4_mapped() {
                Some(a) => (u128::from(u32::from(a)), u128::from(u32::from(n)), 32),
                None => return false,
            },
            _ => return false,
        };
        let bits: u32 = if bits.is_empty() { width } else { bits.trim().parse().unwrap_or(u32::MAX) };
        if bits > width {
            return false;
        }
        let shift = width - bits;
        shift == width || (ip >> shift) == (net >> shift)
    })
}

/// A plain URL value: type `URL`, `0.TYPE/URL` or a `URL.` subtype.
pub(super) fn is_url(v: &HandleValue) -> bool {
    let t = v.value_type.as_slice();
    t.eq_ignore_ascii_case(types::URL) || t.eq_ignore_ascii_case(b"0.TYPE/URL") || v.is_type(types::URL)
}

/// The legacy rule: the first `URL` (or `0.TYPE/URL`) value, else the first `URL.` subtype.
pub(super) fn first_url(values: &[HandleValue]) -> Option<&HandleValue> {
    let exact = |v: &&HandleValue| {
        v.value_type.eq_ignore_ascii_case(types::URL) || v.value_type.eq_ignore_ascii_case(b"0.TYPE/URL")
    };
    values.iter().find(exact).or_else(|| values.iter().find(|v| is_url(v)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loc(xml: &str, urls: &[&str]) -> Locations {
        let mut values = vec![HandleValue::new(1, "10320/loc", xml)];
        values.extend(urls.iter().enumerate().map(|(i, u)| HandleValue::new(i as i32 + 2, "URL", *u)));
        Locations::from_values(&values).unwrap()
    }

    fn pick(l: &Locations, locatt: &[(&str, &str)], ip: &str, country: Option<&str>, r: f64) -> Option<String> {
        let locatt: Vec<(String, String)> = locatt.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let ctx = Selection { locatt: &locatt, ip: ip.parse().unwrap(), country };
        l.choose(&ctx, r).and_then(|l| l.target("T/1"))
    }

    const XML: &str = r#"<locations>
        <location id="0" href="https://a/" weight="0"/>
        <location id="1" href="https://b/" score="5" http_sc="303"/>
        <location id="2" href="https://c/" score="1" ctype="application/json" country="gb"/>
        <location id="3" href="https://d/" addresses="10.0.0.0/8 192.168.1.7" score="1"/>
      </locations>"#;

    /// Any handle's owner (or, through the resolver, any remote handle) writes
    /// 10320/loc: nesting that overflowed roxmltree's recursion is ignored like
    /// any XML that does not parse, and the legacy URL still serves.
    #[test]
    fn deeply_nested_locations_are_ignored_not_parsed() {
        let deep = format!("<locations>{}{}</locations>", "<x>".repeat(200_000), "</x>".repeat(200_000));
        let l = std::thread::Builder::new()
            .stack_size(2 << 20)
            .spawn(move || loc(&deep, &["https://legacy/"]))
            .unwrap()
            .join()
            .unwrap();
        assert_eq!(pick(&l, &[], "127.0.0.1", None, 0.5).as_deref(), Some("https://legacy/"));
    }

    #[test]
    fn each_method_narrows() {
        let l = loc(XML, &["https://legacy/"]);
        assert_eq!(l.list.len(), 5, "legacy URL joins");
        assert_eq!(pick(&l, &[], "127.0.0.1", None, 0.5).as_deref(), Some("https://b/"), "highest score");
        assert_eq!(pick(&l, &[("id", "0")], "127.0.0.1", None, 0.5).as_deref(), Some("https://a/"), "explicit");
        assert_eq!(pick(&l, &[("id", "9")], "127.0.0.1", None, 0.5).as_deref(), Some("https://b/"), "no match ignored");
        assert_eq!(pick(&l, &[("ctype", "application/json")], "127.0.0.1", None, 0.5).as_deref(), Some("https://c/"));
        assert_eq!(pick(&l, &[], "10.9.8.7", None, 0.5).as_deref(), Some("https://d/"), "address");
        assert_eq!(pick(&l, &[], "192.168.1.7", None, 0.5).as_deref(), Some("https://d/"));
        assert_eq!(pick(&l, &[], "::ffff:10.1.1.1", None, 0.5).as_deref(), Some("https://d/"), "mapped v4");
        assert_eq!(pick(&l, &[], "127.0.0.1", Some("GB"), 0.5).as_deref(), Some("https://c/"), "country");
        assert_eq!(pick(&l, &[], "127.0.0.1", Some("fr"), 0.5).as_deref(), Some("https://b/"), "no country: others");
        assert_eq!(l.list[2].status(), 303);
        assert_eq!(l.list[1].status(), 302);
    }

    #[test]
    fn weighted_random_and_zero_weight() {
        let l = loc(
            r#"<locations chooseby="weighted"><location href="https://x/" weight="1"/><location href="https://y/" weight="3"/><location href="https://z/" weight="0"/></locations>"#,
            &[],
        );
        assert_eq!(pick(&l, &[], "127.0.0.1", None, 0.0).as_deref(), Some("https://x/"));
        assert_eq!(pick(&l, &[], "127.0.0.1", None, 0.24).as_deref(), Some("https://x/"));
        assert_eq!(pick(&l, &[], "127.0.0.1", None, 0.26).as_deref(), Some("https://y/"));
        assert_eq!(pick(&l, &[], "127.0.0.1", None, 0.999).as_deref(), Some("https://y/"));
        let zero = loc(
            r#"<locations><location href="https://x/" weight="0"/><location href="https://y/" weight="0"/></locations>"#,
            &[],
        );
        assert_eq!(pick(&zero, &[], "127.0.0.1", None, 0.5), None, "nothing to choose at random");
    }

    #[test]
    fn templates_status_and_legacy_switch() {
        let t = loc(
            r#"<locations no_legacy="true"><location href_template="https://t/{hdl}?p={hdl:path}"/></locations>"#,
            &["https://u/"],
        );
        assert_eq!(t.list.len(), 1);
        assert_eq!(t.list[0].target("T/a b").as_deref(), Some("https://t/T%2Fa%20b?p=T/a%20b"));
        let both =
            loc(r#"<locations><location href="https://h/{hdl}" href_template="https://t/{hdl}"/></locations>"#, &[]);
        assert_eq!(both.list[0].target("T/1").as_deref(), Some("https://h/{hdl}"), "href wins, unexpanded");
        let bad = Location { attrs: vec![("http_sc".into(), "200".into())], legacy: false };
        assert_eq!(bad.status(), 302);
        assert!(Locations::from_values(&[HandleValue::new(1, "URL", "x")]).is_none());
        let broken = loc("<locations><location href=", &["https://u/"]);
        assert_eq!(broken.list.len(), 1, "bad XML: only the legacy URL");
        let dtd = loc(r#"<!DOCTYPE l [<!ENTITY a "aaaa">]><locations><location href="&a;"/></locations>"#, &[]);
        assert!(dtd.list.is_empty(), "no DTDs, no entity expansion");
    }

    #[test]
    fn legacy_first_url() {
        let v = vec![
            HandleValue::new(1, "URL.alt", "alt"),
            HandleValue::new(2, "EMAIL", "e"),
            HandleValue::new(3, "url", "main"),
        ];
        assert_eq!(first_url(&v).unwrap().data, b"main");
        assert_eq!(first_url(&v[..2]).unwrap().data, b"alt");
        assert!(first_url(&v[1..2]).is_none());
    }

    #[test]
    fn listing_is_escaped() {
        let l =
            loc(r#"<locations><location href="https://a/?x=1&amp;y=&quot;2&quot;"/></locations>"#, &["https://u/<x>"]);
        assert_eq!(
            l.to_xml(),
            "<locations>\n<location mode=\"legacy\" href=\"https://u/&lt;x&gt;\" weight=\"0\"/>\n<location href=\"https://a/?x=1&amp;y=&quot;2&quot;\"/>\n</locations>\n"
        );
    }

    /// Found by the `web_request` fuzz target: two attributes with one local
    /// name in different namespaces made `showurls` write it twice, XML that
    /// no reader accepts. The first counts, as `get` reads it.
    #[test]
    fn namespaced_attributes_of_one_name_are_listed_once() {
        let xml = r#"<locations xmlns:a="u1" xmlns:b="u2"><location a:href="x" b:href="y"/></locations>"#;
        let l = loc(xml, &[]);
        assert_eq!(l.list[0].attrs, vec![("href".to_string(), "x".to_string())]);
        let listed = vec![HandleValue::new(1, "10320/loc", l.to_xml())];
        assert_eq!(Locations::from_values(&listed).unwrap().list.len(), 1, "the listing reads back");
    }
}
