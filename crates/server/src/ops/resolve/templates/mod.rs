//! Template handles (Technical Manual §11) as a resolution source: a handle
//! of a prefix homed here that is not in the store may be built from a base
//! handle and a template, as Handle.Net's `getRawHandleValuesWithTemplate`.
//!
//! 1. The namespace: the HS_NAMESPACE value of the prefix handle `0.NA/<p>`
//!    when this server holds it (unless `[templates] namespace_override`),
//!    else `[templates] namespace`.
//! 2. The delimiter: the `delimiter` of the namespace's first `<template>`,
//!    else `[templates] delimiter`; none, no template handles. It is looked
//!    for after the prefix: `1234/abc@x` with `@` has base `1234/abc` and
//!    extension `x`; with `/` the base is `1234`, whose values are none.
//! 3. The base handle's own HS_NAMESPACE comes first, the prefix's after it.
//!    With no `<template>` in either, the handle resolves to the base's values.
//!
//! Cited templates (`<template ref="index:handle"/>`) are read from handles
//! homed here; a handle held elsewhere is not followed (not found).

mod bounds;
mod builder;
mod built;
mod compiled;
mod expressions;
mod params;

use super::chain::{Lookup, Query, ResolutionSource};
use crate::config::templates::TemplatesConfig;
use crate::directory::Directory;
use crate::logging::ThrottledWarning;
use crate::metrics::Metrics;
use crate::ops::OpError;
use async_trait::async_trait;
use bounds::{Bound, Budget};
use builder::{Builder, Outcome, Pass};
use built::Built;
use compiled::Compiled;
use handled_proto::handle;
use handled_proto::header::ResponseCode;
use handled_proto::value::{types, HandleValue};
use handled_store::HandleRecord;
use params::Params;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;

pub struct Templates {
    directory: Arc<Directory>,
    metrics: Arc<Metrics>,
    config: TemplatesConfig,
    case_sensitive: bool,
}

impl Templates {
    pub fn new(
        directory: Arc<Directory>,
        metrics: Arc<Metrics>,
        config: TemplatesConfig,
        case_sensitive: bool,
    ) -> Self {
        Templates { directory, metrics, config, case_sensitive }
    }
}

#[async_trait]
impl ResolutionSource for Templates {
    async fn lookup(&self, query: &Query<'_>, not_found: bool) -> Result<Lookup, OpError> {
        // Only handles this server is responsible for and does not hold.
        if !not_found {
            return Ok(Lookup::Pass);
        }
        let h = String::from_utf8_lossy(query.canonical);
        match build(self, &h).await? {
            Ok(Some(values)) => Ok(Lookup::Record(HandleRecord { values, name: None })),
            Ok(None) => Ok(Lookup::NotFound),
            Err(bound) => Err(refused(&self.metrics, &h, bound)),
        }
    }
}

/// A construction past one of its bounds: counted, logged (at most one line
/// every few seconds: anyone may ask again and again), and answered with an
/// error that says which bound, for the prefix admin who wrote the template.
fn refused(metrics: &Metrics, h: &str, bound: Bound) -> OpError {
    metrics.template_refused(bound.label());
    static LOG: Mutex<ThrottledWarning> = Mutex::new(ThrottledWarning::new(Duration::from_secs(10)));
    if let Ok(mut log) = LOG.lock() {
        log.warn(format_args!(
            "template handle {h:?} refused: its template {bound} (docs/template-handles.md, Bounds)"
        ));
    }
    OpError::new(ResponseCode::ERROR, format!("Template handle refused: its template {bound}"))
}

/// The values of template handle `h`, None when it is not one, or the bound
/// its construction ran into.
async fn build(source: &Templates, h: &str) -> Result<Result<Option<Vec<HandleValue>>, Bound>, OpError> {
    let (config, state) = (&source.config, &source.directory);
    let prefix_namespace = match config.namespace_override {
        true => None,
        false => namespace_of(state, &String::from_utf8_lossy(&handle::prefix_handle(h.as_bytes()))).await?,
    };
    let namespace = prefix_namespace.or_else(|| config.namespace.clone());
    let case_sensitive = source.case_sensitive;
    // The budget spans compiling and every pass: a pass that stops for a
    // reference was work.
    let mut budget = Budget::default();
    let namespace = match namespace.as_deref().map(|x| compiled::compile(x, case_sensitive, &mut budget)) {
        None => None,
        Some(Ok(compiled)) => Some(compiled),
        Some(Err(bound)) => return Ok(Err(bound)),
    };
    let delimiter = namespace.as_ref().and_then(|n| n.as_ref()?.delimiter.clone()).or_else(|| config.delimiter.clone());
    let Some(delimiter) = delimiter.filter(|d| !d.is_empty()) else { return Ok(Ok(None)) };

    let prefix_len = h.find('/').unwrap_or(h.len());
    let Some(at) = h.get(prefix_len..).and_then(|rest| rest.find(&delimiter)).map(|i| prefix_len + i) else {
        return Ok(Ok(None));
    };
    let (base, extension) = (&h[..at], &h[at + delimiter.len()..]);
    let base_values = match state.record(&state.storage_key(base.as_bytes())).await? {
        Some(record) => record.values,
        None if namespace.is_none() => return Ok(Ok(None)),
        None => Vec::new(),
    };
    let namespaces = match in_order(&base_values, namespace.flatten(), case_sensitive, &mut budget) {
        Ok(namespaces) => namespaces,
        Err(bound) => return Ok(Err(bound)),
    };
    if !namespaces.iter().any(|n| n.lists_templates) {
        return Ok(Ok((!base_values.is_empty()).then_some(base_values)));
    }

    let mut refs = HashMap::new();
    // Each pass fetches at most one cited template; a pass follows at most
    // MAX_REFS of them, so this ends.
    loop {
        let builder = Builder { base_values: &base_values, case_sensitive, refs: &refs };
        match one_pass(&builder, &namespaces, [h, base, extension], &mut budget) {
            (Outcome::Built, values) => return Ok(Ok(Some(values.into_values()))),
            (Outcome::NoTemplate | Outcome::NotFound, _) => return Ok(Ok(None)),
            (Outcome::Refused(bound), _) => return Ok(Err(bound)),
            (Outcome::NeedRef { index, handle }, _) => {
                let cited = cited_value(state, index, &handle).await?;
                refs.insert((index, handle), cited);
            }
        }
    }
}

/// The base's own namespace first, the prefix's (or the configured one) after it.
fn in_order(
    base_values: &[HandleValue],
    prefix: Option<Arc<Compiled>>,
    case_sensitive: bool,
    budget: &mut Budget,
) -> Result<Vec<Arc<Compiled>>, Bound> {
    let own = match base_values.iter().find(|v| v.is_type(types::HS_NAMESPACE)) {
        Some(v) => compiled::compile(&data_text(&v.data), case_sensitive, budget)?,
        None => None,
    };
    Ok(own.into_iter().chain(prefix).collect())
}

/// One pass with the cited templates fetched so far: the namespaces in order
/// until one has a template that applies. `names`: the handle, its base and
/// its extension.
fn one_pass(
    builder: &Builder,
    namespaces: &[Arc<Compiled>],
    names: [&str; 3],
    budget: &mut Budget,
) -> (Outcome, Built) {
    let [h, base, extension] = names;
    let (mut params, mut values) = (Params::new(h, base, extension), Built::default());
    let mut pass = Pass::new(&mut params, &mut values, budget);
    let mut outcome = Outcome::NoTemplate;
    for namespace in namespaces {
        outcome = builder.construct(namespace, &mut pass);
        if outcome != Outcome::NoTemplate {
            break;
        }
    }
    (outcome, values)
}

/// The HS_NAMESPACE of `h` when this server holds it.
async fn namespace_of(state: &Directory, h: &str) -> Result<Option<String>, OpError> {
    let record = state.record(&state.storage_key(h.as_bytes())).await?;
    Ok(record.and_then(|r| r.values.iter().find(|v| v.is_type(types::HS_NAMESPACE)).map(|v| data_text(&v.data))))
}

/// Value `index` of `h` as text, when `h` lives here.
async fn cited_value(state: &Directory, index: i32, h: &str) -> Result<Option<String>, OpError> {
    if !state.is_homed(h.as_bytes()).await {
        return Ok(None);
    }
    let record = state.record(&state.storage_key(h.as_bytes())).await?;
    Ok(record.and_then(|r| r.values.iter().find(|v| v.index == index).map(|v| data_text(&v.data))))
}

fn data_text(data: &[u8]) -> String {
    String::from_utf8_lossy(data).into_owned()
}

/// Fuzzing's way in (`fuzz/fuzz_targets/templates.rs`): the construction of
/// [`build`] without a server, for handle `1234/abc<delimiter><extension>`
/// whose base `1234/abc` holds `base`, under `namespace` as the prefix's.
/// Cited templates are answered "not held here". Err is the bound's label.
#[cfg(feature = "fuzzing")]
pub fn fuzz_build(
    namespace: &str,
    extension: &str,
    base: &[HandleValue],
) -> Result<Option<Vec<HandleValue>>, &'static str> {
    let mut budget = Budget::default();
    let prefix = compiled::compile(namespace, false, &mut budget).map_err(Bound::label)?;
    let namespaces = in_order(base, prefix, false, &mut budget).map_err(Bound::label)?;
    if !namespaces.iter().any(|n| n.lists_templates) {
        return Ok((!base.is_empty()).then(|| base.to_vec()));
    }
    let h = format!("1234/abc@{extension}");
    let mut refs = HashMap::new();
    loop {
        let builder = Builder { base_values: base, case_sensitive: false, refs: &refs };
        match one_pass(&builder, &namespaces, [&h, "1234/abc", extension], &mut budget) {
            (Outcome::Built, values) => return Ok(Some(values.into_values())),
            (Outcome::NoTemplate | Outcome::NotFound, _) => return Ok(None),
            (Outcome::Refused(bound), _) => return Err(bound.label()),
            (Outcome::NeedRef { index, handle }, _) => {
                refs.insert((index, handle), None);
            }
        }
    }
}
