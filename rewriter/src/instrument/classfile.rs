//! A raw view of a class file: where each constant-pool entry, method and
//! `Code` attribute lies, without decoding anything else. Instrumentation
//! copies every byte it does not change from this view.

use crate::Error;
use crate::vocab::reader::Reader;
use crate::vocab::tag;

/// One constant-pool slot: its tag (0 for slot 0 and the second slot of a
/// long/double) and the file offset of the byte after the tag.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CpSlot {
    pub(crate) tag: u8,
    pub(crate) pos: u32,
}

/// A byte range of the class file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Span {
    pub(crate) start: usize,
    pub(crate) end: usize,
}

#[derive(Clone, Debug)]
pub(crate) struct RawMethod {
    pub(crate) access: u16,
    pub(crate) name: u16,
    pub(crate) descriptor: u16,
    /// The whole `Code` attribute, header (name index, length) included.
    pub(crate) code: Option<Span>,
}

#[derive(Debug)]
pub(crate) struct ClassFile<'a> {
    pub(crate) bytes: &'a [u8],
    pub(crate) major: u16,
    pub(crate) cp: Vec<CpSlot>,
    /// File offset where the constant pool ends (access flags start).
    pub(crate) cp_end: usize,
    pub(crate) this_class: u16,
    pub(crate) methods: Vec<RawMethod>,
}

impl<'a> ClassFile<'a> {
    pub(crate) fn parse(bytes: &'a [u8]) -> Result<Self, Error> {
        let mut r = Reader::new(bytes);
        if r.u32("magic")? != 0xCAFE_BABE {
            return Err(Error::Malformed("bad magic number".into()));
        }
        let _minor = r.u16("minor version")?;
        let major = r.u16("major version")?;
        let count = r.u16("constant pool count")?;
        if count == 0 {
            return Err(Error::Malformed("constant pool count is 0".into()));
        }
        let mut cp = Vec::with_capacity(count as usize);
        cp.push(CpSlot { tag: 0, pos: 0 });
        while cp.len() < count as usize {
            let tag = r.u8("constant pool tag")?;
            let pos = r.pos() as u32;
            let size = match tag {
                tag::UTF8 => r.u16("utf8 length")? as usize,
                tag::INTEGER | tag::FLOAT => 4,
                tag::LONG | tag::DOUBLE => 8,
                tag::CLASS | tag::STRING | tag::METHOD_TYPE | tag::MODULE | tag::PACKAGE => 2,
                tag::FIELDREF..=tag::NAME_AND_TYPE | tag::DYNAMIC | tag::INVOKE_DYNAMIC => 4,
                tag::METHOD_HANDLE => 3,
                _ => {
                    return Err(Error::Malformed(format!(
                        "constant pool entry {} has unknown tag {tag}",
                        cp.len()
                    )));
                }
            };
            r.skip(size, "constant pool entry")?;
            cp.push(CpSlot { tag, pos });
            if tag == 5 || tag == 6 {
                if cp.len() >= count as usize {
                    return Err(Error::Malformed(
                        "long/double constant in last pool slot".into(),
                    ));
                }
                cp.push(CpSlot { tag: 0, pos });
            }
        }
        let cp_end = r.pos();
        let _access = r.u16("access flags")?;
        let this_class = r.u16("this class")?;
        let _super = r.u16("super class")?;
        let n = r.u16("interfaces count")? as usize;
        r.skip(2 * n, "interfaces")?;
        let nfields = r.u16("fields count")?;
        for _ in 0..nfields {
            r.skip(6, "field")?;
            skip_attributes(&mut r)?;
        }
        let nmethods = r.u16("methods count")?;
        let mut cf = ClassFile {
            bytes,
            major,
            cp,
            cp_end,
            this_class,
            methods: Vec::with_capacity(nmethods as usize),
        };
        for _ in 0..nmethods {
            let access = r.u16("method access flags")?;
            let name = r.u16("method name")?;
            let descriptor = r.u16("method descriptor")?;
            let nattrs = r.u16("method attributes count")?;
            let mut code = None;
            for _ in 0..nattrs {
                let start = r.pos();
                let aname = r.u16("attribute name")?;
                let len = r.u32("attribute length")? as usize;
                r.skip(len, "attribute")?;
                if cf.utf8(aname)? == b"Code" {
                    if code.is_some() {
                        return Err(Error::Malformed("method has two Code attributes".into()));
                    }
                    code = Some(Span {
                        start,
                        end: r.pos(),
                    });
                }
            }
            cf.methods.push(RawMethod {
                access,
                name,
                descriptor,
                code,
            });
        }
        skip_attributes(&mut r)?;
        if r.remaining() != 0 {
            return Err(Error::Malformed("extra bytes after the class file".into()));
        }
        Ok(cf)
    }

    fn slot(&self, idx: u16, tag: u8) -> Result<usize, Error> {
        match self.cp.get(idx as usize) {
            Some(s) if s.tag == tag && idx != 0 => Ok(s.pos as usize),
            _ => Err(Error::Malformed(format!(
                "constant pool index {idx} is not of tag {tag}"
            ))),
        }
    }

    /// The raw (modified UTF-8) bytes of a `CONSTANT_Utf8`.
    pub(crate) fn utf8(&self, idx: u16) -> Result<&'a [u8], Error> {
        let pos = self.slot(idx, tag::UTF8)?;
        let mut r = Reader::at(self.bytes, pos);
        let len = r.u16("utf8")? as usize;
        r.bytes(len, "utf8")
    }

    /// Two u16 operands of a reference-like entry with the given tag.
    pub(crate) fn pair(&self, idx: u16, tag: u8) -> Result<(u16, u16), Error> {
        let pos = self.slot(idx, tag)?;
        let mut r = Reader::at(self.bytes, pos);
        Ok((r.u16("pool entry")?, r.u16("pool entry")?))
    }

    /// The name of a `CONSTANT_Class`.
    pub(crate) fn class_name(&self, idx: u16) -> Result<&'a [u8], Error> {
        let pos = self.slot(idx, tag::CLASS)?;
        let name = Reader::at(self.bytes, pos).u16("class name")?;
        self.utf8(name)
    }

    /// The method name of a Methodref or InterfaceMethodref.
    pub(crate) fn member_name(&self, idx: u16) -> Result<&'a [u8], Error> {
        self.utf8(self.member_name_and_type(idx)?.0)
    }

    /// The descriptor of a Methodref or InterfaceMethodref.
    pub(crate) fn member_descriptor(&self, idx: u16) -> Result<&'a [u8], Error> {
        self.utf8(self.member_name_and_type(idx)?.1)
    }

    /// The name and descriptor indices of a Methodref or
    /// InterfaceMethodref.
    fn member_name_and_type(&self, idx: u16) -> Result<(u16, u16), Error> {
        let tag = self.cp.get(idx as usize).map(|s| s.tag).unwrap_or(0);
        let tag = if tag == tag::INTERFACE_METHODREF {
            tag
        } else {
            tag::METHODREF
        };
        let (_, nat) = self.pair(idx, tag)?;
        self.pair(nat, tag::NAME_AND_TYPE)
    }
}

fn skip_attributes(r: &mut Reader<'_>) -> Result<(), Error> {
    let n = r.u16("attributes count")?;
    for _ in 0..n {
        r.skip(2, "attribute name")?;
        let len = r.u32("attribute length")? as usize;
        r.skip(len, "attribute")?;
    }
    Ok(())
}
